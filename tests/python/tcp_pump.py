"""The byte pump the tests' Python proxies share (sni_proxy.SniProxy,
slow_proxy.SlowProxy): copies one direction of a proxied TCP connection.

The C++ proxies are separate (bench/wan: the WAN emulator; tests/integration:
fault_proxy.cc, asio): a Python test cannot link them, and running the WAN
emulator as a process would not give the GIL test its point (only Python
threads holding chunks show that next() releases the GIL).
"""

from __future__ import annotations

import socket
from typing import Callable, Iterable, Optional


def pump(src: socket.socket, dst: socket.socket, chunk: int = 65536,
         on_data: Optional[Callable[[bytes], None]] = None) -> None:
    """Forwards src's bytes to dst until src ends or either fails, calling
    on_data(data) before each write (to delay or count); then shuts both
    down, so the pump of the other direction ends too."""
    try:
        while data := src.recv(chunk):
            if on_data is not None:
                on_data(data)
            dst.sendall(data)
    except OSError:
        pass
    shut_down((src, dst))


def shut_down(socks: Iterable[socket.socket]) -> None:
    """Shuts every socket down for both directions, ignoring those already gone."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
