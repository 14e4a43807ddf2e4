"""Endpoints that refuse connections, held for the test that asked for one.

A port bound and not listening refuses every connection at once (a trainer dead, or
never started). One bound then closed at once may be taken by another test's socket on
a busy machine before the client connects: tests/c/test_c_close_notice.py's was (its
client connected, and its close said "the trainer's receiver ... is disconnected since"
instead of "no receiver ever accepted a connection"). Held, nobody else binds it, nor
does a connect pick it as its own port. tests/conftest.py releases them after each test.

A port a test hands to a launch to listen on (torch.distributed's ``MASTER_PORT``, a
server's) has the same race, longer: found by binding and closing, it was free for the
seconds ``accelerate launch`` takes to start, for any other test's bind to port 0 or
connect to take. `held_port` holds it the same way, with ``SO_REUSEADDR``: the kernel
picks it for nobody else's port 0 nor connect, and an explicit bind that also sets
``SO_REUSEADDR`` (torch's TCPStore, libzmq's listeners do) may still bind and listen on
it, as the launch it was drawn for does; until it does, it refuses connections.
"""

from __future__ import annotations

import socket

__all__ = ["held_port", "refused_endpoint", "release"]

#: the sockets holding the ports `refused_endpoint` gave, until `release`
_HELD: list[socket.socket] = []


def refused_endpoint() -> str:
    """``tcp://127.0.0.1:PORT`` where every connection is refused until the test ends."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    _HELD.append(held)
    return f"tcp://127.0.0.1:{held.getsockname()[1]}"


def held_port(span: int = 1) -> int:
    """A port P of 127.0.0.1 such that P .. P + span - 1 are held until the test ends: no
    other socket is given them, yet a listener with ``SO_REUSEADDR`` binds them (torch's
    TCPStore, a zmq bind: the launch or server the test hands them to). Connections to
    them are refused until it does."""
    for _ in range(100):
        first = _reusable(0)
        port = first.getsockname()[1]
        held = [first]
        try:
            held += [_reusable(port + k) for k in range(1, span)]
        except OSError:  # a neighbour is taken: another draw
            for sock in held:
                sock.close()
            continue
        _HELD.extend(held)
        return int(port)
    raise RuntimeError(f"no {span} consecutive free ports on 127.0.0.1 in 100 draws")


def _reusable(port: int) -> socket.socket:
    sock = socket.socket()
    try:
        # bound first without the option: the bind fails if anyone holds the port, even
        # a socket with SO_REUSEADDR not yet listening (another test's held one)
        sock.bind(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    except OSError:
        sock.close()
        raise
    return sock


def release() -> None:
    """Close the sockets holding the ports given (after each test: tests/conftest.py)."""
    while _HELD:
        _HELD.pop().close()
