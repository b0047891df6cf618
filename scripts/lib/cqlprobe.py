#!/usr/bin/env python3
"""A tiny CQL native-protocol (v4) client: the scripts' readiness and status probe.

Standard library only, so it works before the virtualenv exists. It connects
(optionally over TLS, optionally with a password), runs one or more CQL
queries and prints the rows, tab-separated. Exit status: 0 when every query
returned a result, 1 on any failure (the reason goes to stderr).

usage: cqlprobe.py [--host H] [--port P] [--timeout S] [--user U --password PW]
                   [--tls --ca CA.crt [--cert C.crt --key C.key] [--no-verify]]
                   [-e QUERY]...

Without -e it runs: SELECT release_version FROM system.local
"""

import argparse
import ipaddress
import socket
import ssl
import struct
import sys
import uuid

VERSION = 0x04
OP_ERROR, OP_STARTUP, OP_READY, OP_AUTHENTICATE = 0x00, 0x01, 0x02, 0x03
OP_QUERY, OP_RESULT, OP_AUTH_RESPONSE, OP_AUTH_SUCCESS = 0x07, 0x08, 0x0F, 0x10
CONSISTENCY_ONE = 0x0001
RESULT_ROWS = 0x0002


class ProbeError(Exception):
    pass


def string(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def long_string(s):
    b = s.encode()
    return struct.pack(">i", len(b)) + b


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ProbeError(f"truncated body: wanted {n} bytes at {self.pos} of {len(self.data)}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def short(self):
        return struct.unpack(">H", self.take(2))[0]

    def int(self):
        return struct.unpack(">i", self.take(4))[0]

    def string(self):
        return self.take(self.short()).decode()

    def bytes(self):
        n = self.int()
        return None if n < 0 else self.take(n)

    def option(self):
        """A column type: (id, [sub-types]); enough to skip and to decode simple types."""
        tid = self.short()
        if tid == 0x0000:
            return (tid, self.string())
        if tid in (0x0020, 0x0022):  # list, set
            return (tid, [self.option()])
        if tid == 0x0021:  # map
            return (tid, [self.option(), self.option()])
        if tid == 0x0030:  # UDT
            self.string(), self.string()
            return (tid, [(self.string(), self.option())[1] for _ in range(self.short())])
        if tid == 0x0031:  # tuple
            return (tid, [self.option() for _ in range(self.short())])
        return (tid, None)


def decode(typ, raw):
    if raw is None:
        return "null"
    tid, sub = typ
    if tid in (0x0001, 0x000D):  # ascii, varchar
        return raw.decode()
    if tid in (0x0002, 0x0009, 0x000B, 0x0013, 0x0014):  # bigint, int, timestamp, smallint, tinyint
        return str(int.from_bytes(raw, "big", signed=True))
    if tid == 0x0004:  # boolean
        return "true" if raw != b"\x00" else "false"
    if tid in (0x000C, 0x000F):  # uuid, timeuuid
        return str(uuid.UUID(bytes=raw))
    if tid == 0x0010:  # inet
        return str(ipaddress.ip_address(raw))
    if tid in (0x0020, 0x0022):  # list, set
        r = Reader(raw)
        return "[" + ",".join(decode(sub[0], r.bytes()) for _ in range(r.int())) + "]"
    if tid == 0x0021:  # map
        r = Reader(raw)
        return "{" + ",".join(f"{decode(sub[0], r.bytes())}:{decode(sub[1], r.bytes())}"
                              for _ in range(r.int())) + "}"
    return "0x" + raw.hex()


class Connection:
    def __init__(self, args):
        self.args = args
        sock = socket.create_connection((args.host, args.port), timeout=args.timeout)
        sock.settimeout(args.timeout)
        if args.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if args.no_verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            else:
                ctx.load_verify_locations(cafile=args.ca)
            if args.cert:
                ctx.load_cert_chain(args.cert, args.key)
            sock = ctx.wrap_socket(sock, server_hostname=args.host)
        self.sock = sock
        self.stream = 0

    def close(self):
        self.sock.close()

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ProbeError("connection closed by the server")
            buf += chunk
        return bytes(buf)

    def request(self, opcode, body=b""):
        self.stream = (self.stream + 1) % 32768
        self.sock.sendall(struct.pack(">BBhBi", VERSION, 0, self.stream, opcode, len(body)) + body)
        while True:
            version, flags, stream, op, length = struct.unpack(">BBhBi", self.recv_exact(9))
            body = self.recv_exact(length)
            if version & 0x7F != VERSION:
                raise ProbeError(f"server answered protocol version {version & 0x7F}")
            if stream == -1:  # an event we did not ask for
                continue
            if flags & 0x08:  # warnings: a [string list] before the body
                r = Reader(body)
                for _ in range(r.short()):
                    r.string()
                body = body[r.pos:]
            if op == OP_ERROR:
                r = Reader(body)
                code = r.int()
                raise ProbeError(f"server error 0x{code:04x}: {r.string()}")
            return op, body

    def startup(self):
        op, body = self.request(OP_STARTUP, struct.pack(">H", 1) + string("CQL_VERSION") + string("3.0.0"))
        if op == OP_AUTHENTICATE:
            if not self.args.user:
                raise ProbeError(f"server requires authentication ({Reader(body).string()}); pass --user/--password")
            token = b"\x00" + self.args.user.encode() + b"\x00" + self.args.password.encode()
            op, body = self.request(OP_AUTH_RESPONSE, struct.pack(">i", len(token)) + token)
            if op != OP_AUTH_SUCCESS:
                raise ProbeError(f"unexpected answer 0x{op:02x} to AUTH_RESPONSE")
        elif op != OP_READY:
            raise ProbeError(f"unexpected answer 0x{op:02x} to STARTUP")

    def query(self, cql):
        op, body = self.request(OP_QUERY, long_string(cql) + struct.pack(">HB", CONSISTENCY_ONE, 0))
        if op != OP_RESULT:
            raise ProbeError(f"unexpected answer 0x{op:02x} to QUERY")
        r = Reader(body)
        if r.int() != RESULT_ROWS:
            return []
        flags, ncols = r.int(), r.int()
        if flags & 0x0002:
            r.bytes()  # paging state
        types = []
        if not flags & 0x0004:
            if flags & 0x0001:
                r.string(), r.string()
            for _ in range(ncols):
                if not flags & 0x0001:
                    r.string(), r.string()
                r.string()
                types.append(r.option())
        return [[decode(types[c] if types else (0, None), r.bytes()) for c in range(ncols)]
                for _ in range(r.int())]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9042)
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per network operation")
    p.add_argument("--user")
    p.add_argument("--password", default="")
    p.add_argument("--tls", action="store_true")
    p.add_argument("--ca", help="CA certificate that signed the server's certificate")
    p.add_argument("--cert", help="client certificate (mutual TLS)")
    p.add_argument("--key", help="client key (mutual TLS)")
    p.add_argument("--no-verify", action="store_true", help="accept any server certificate")
    p.add_argument("-e", "--execute", action="append", dest="queries", metavar="QUERY")
    args = p.parse_args()
    if args.tls and not args.ca and not args.no_verify:
        p.error("--tls needs --ca (or --no-verify)")
    try:
        conn = Connection(args)
        try:
            conn.startup()
            for q in args.queries or ["SELECT release_version FROM system.local"]:
                for row in conn.query(q):
                    print("\t".join(row))
        finally:
            conn.close()
    except BrokenPipeError:  # stdout closed early (e.g. piped into head)
        sys.stderr.close()
        return 0
    except (OSError, ProbeError) as e:
        print(f"cqlprobe: {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
