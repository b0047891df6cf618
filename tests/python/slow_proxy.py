"""SlowProxy: a TCP proxy run by Python threads that holds each
server->client chunk for ``delay`` seconds (test_loader's GIL test, the
Writer's Ctrl-C test). ``delay`` may change while it runs: 0 forwards at
once, a later larger value holds the chunks from then on.

A loader or writer connected through it can only get data while those
threads run, that is while the caller's thread does not hold the GIL.
"""

from __future__ import annotations

import socket
import threading
import time

from tcp_pump import pump, shut_down


class SlowProxy:
    def __init__(self, target: tuple[str, int], delay: float):
        self.target, self.delay = target, delay
        self.forwarded = 0  # server->client bytes, written only by the proxy threads
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._socks += [client, server]
            threading.Thread(target=pump, args=(client, server, 1 << 20), daemon=True).start()
            threading.Thread(target=pump, args=(server, client, 1 << 20, self._hold), daemon=True).start()

    def _hold(self, data: bytes):
        if self.delay > 0:
            time.sleep(self.delay)
        with self._lock:
            self.forwarded += len(data)

    def close(self):
        self._listener.close()
        shut_down(self._socks)
        for s in self._socks:
            s.close()
