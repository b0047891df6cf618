"""A small TLS SNI-routing proxy for the tests, as managed Cassandra services run one.

It reads the TLS ClientHello of each connection (without terminating TLS),
takes the server name (SNI) the client sent, and forwards the raw TCP stream
to the node whose host id that name is. A connection without a server name,
or with one it has no route for, is closed. `names` records every server name
seen, so a test can check that the client routed by host id.

Bounded: the ClientHello must fit in one TLS record (at most 16 KiB plus the
header) and arrive within 10 seconds.
"""

from __future__ import annotations

import socket
import struct
import threading

from tcp_pump import pump

MAX_RECORD = 16384 + 5


def server_name(hello: bytes) -> str | None:
    """The host name of the SNI extension of a ClientHello record, or None.

    Raises ValueError when the bytes are not a ClientHello (never reads past them).
    """
    if len(hello) < 5 or hello[0] != 22:
        raise ValueError("not a TLS handshake record")
    (rec_len,) = struct.unpack_from("!H", hello, 3)
    body = hello[5:5 + rec_len]
    if len(body) < rec_len or len(body) < 4 or body[0] != 1:
        raise ValueError("not a complete ClientHello")
    pos = 4 + 2 + 32  # handshake header, client_version, random

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(body):
            raise ValueError("truncated ClientHello")
        out = body[pos:pos + n]
        pos += n
        return out

    take(take(1)[0])                                  # session id
    take(struct.unpack("!H", take(2))[0])             # cipher suites
    take(take(1)[0])                                  # compression methods
    if pos == len(body):
        return None                                   # no extensions
    end = pos + struct.unpack("!H", take(2))[0]
    while pos + 4 <= min(end, len(body)):
        ext_type, ext_len = struct.unpack("!HH", take(4))
        data = take(ext_len)
        if ext_type != 0:
            continue
        i = 2                                         # server_name_list length
        while i + 3 <= len(data):
            kind, n = data[i], struct.unpack_from("!H", data, i + 1)[0]
            if kind == 0:
                return data[i + 3:i + 3 + n].decode("ascii", "replace")
            i += 3 + n
    return None


class SniProxy:
    """Listens on 127.0.0.1 (an ephemeral port); routes: host id -> (address, port)."""

    def __init__(self, routes: dict[str, tuple[str, int]], listen: str = "127.0.0.1"):
        self.routes = dict(routes)
        self.names: list[str | None] = []
        self._sock = socket.create_server((listen, 0))
        self.host, self.port = self._sock.getsockname()[:2]
        self._closed = False
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        with self._lock:
            for c in self._conns:
                try:
                    c.close()
                except OSError:
                    pass

    def __enter__(self) -> "SniProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            self._conns.append(client)
        client.settimeout(10)
        hello = b""
        try:
            while len(hello) < 5 or len(hello) < 5 + struct.unpack_from("!H", hello, 3)[0]:
                chunk = client.recv(MAX_RECORD - len(hello))
                if not chunk or len(hello) + len(chunk) > MAX_RECORD:
                    raise ValueError("no complete ClientHello")
                hello += chunk
            name = server_name(hello)
        except (OSError, ValueError):
            client.close()
            return
        self.names.append(name)
        target = self.routes.get(name or "")
        if target is None:
            client.close()
            return
        try:
            upstream = socket.create_connection(target, timeout=10)
        except OSError:
            client.close()
            return
        with self._lock:
            self._conns.append(upstream)
        client.settimeout(None)
        upstream.settimeout(None)
        upstream.sendall(hello)
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        pump(client, upstream)
