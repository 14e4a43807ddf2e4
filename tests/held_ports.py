"""Endpoints that refuse connections, held for the test that asked for one.

A port bound and not listening refuses every connection at once (a trainer dead, or
never started). One bound then closed at once may be taken by another test's socket on
a busy machine before the client connects: tests/c/test_c_close_notice.py's was (its
client connected, and its close said "the trainer's receiver ... is disconnected since"
instead of "no receiver ever accepted a connection"). Held, nobody else binds it, nor
does a connect pick it as its own port. tests/conftest.py releases them after each test.
"""

from __future__ import annotations

import socket

__all__ = ["refused_endpoint", "release"]

#: the sockets holding the ports `refused_endpoint` gave, until `release`
_HELD: list[socket.socket] = []


def refused_endpoint() -> str:
    """``tcp://127.0.0.1:PORT`` where every connection is refused until the test ends."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    _HELD.append(held)
    return f"tcp://127.0.0.1:{held.getsockname()[1]}"


def release() -> None:
    """Close the sockets holding the ports given (after each test: tests/conftest.py)."""
    while _HELD:
        _HELD.pop().close()
