"""A request to a trainer killed as its kernel accepted the request's TCP connection
(a user's trial, 2026-12-04: SIGKILL the instant the trainer's serve file appeared; a
process's sockets close only after its memory is torn down, and meanwhile its kernel
completes TCP connections in the listen backlog) waited its whole timeout: "no
connection to the trainer's serving endpoint within 1.0 s", where the next request,
against the same dead port, failed at once ("refused the connection: nothing listens
there"). The connection was reset mid-handshake (a failure without detail), and after a
handshake failure `PredictLink.wait_connected` left the decision to the handshake rule,
which never came: every reconnection was refused at the TCP connect, none reached a
handshake. A reconnection refused after that is now a trainer gone, at once.

A raw listener that never accepts (its kernel does: the backlog), closed once the
client's TCP connection is established: the dead process's port. Failed before: the
request was still waiting when the test gave up on it (its timeout, `LONG`, is the
test's and more).

The closed port must refuse, as a dead trainer's does: closed and free, another test's
socket running in parallel (pytest-xdist) could bind it, listen, and take the client's
reconnection. So a second socket holds it (`held_listener`): bound with the listener
under SO_REUSEPORT, never listening, it refuses every connection once the listener is
gone, and keeps the port from any other bind, a port-0 pick or a connect's own port."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from keys_receiver_process import established
from waiting import wait_until

from melissa_trainer.client import Predictor, PredictTimeout

LONG = 120.0  # (the request's timeout: longer than the test's)


def held_listener() -> tuple[socket.socket, socket.socket]:
    """(listener, holder): a TCP listener on a port of 127.0.0.1, and a socket bound to
    the same port that never listens: SYNs go to listening sockets only, so once the
    listener is closed the port refuses, and the holder keeps anyone else off it (a
    bind without SO_REUSEPORT, ours is the only socket with it there, fails)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    listener.bind(("127.0.0.1", 0))
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(listener.getsockname())
    listener.listen(8)
    return listener, holder


def taken(port: int) -> bool:
    """Whether another socket's bind to `port` of 127.0.0.1 is refused (EADDRINUSE)."""
    with socket.socket() as other:
        try:
            other.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


@pytest.mark.timeout(60)
def test_a_trainer_killed_as_it_accepted_the_connection_fails_the_request_at_once() -> None:
    listener, holder = held_listener()
    port = listener.getsockname()[1]
    failed: list[BaseException] = []

    def ask() -> None:
        with Predictor(0, endpoint=f"tcp://127.0.0.1:{port}") as predictor:
            try:
                predictor.predict({"u": np.zeros(4, np.float32)}, timeout=LONG)
            except BaseException as exc:  # noqa: BLE001 - the test's oracle
                failed.append(exc)

    thread = threading.Thread(target=ask, daemon=True)
    try:
        thread.start()
        wait_until(lambda: established(port), "the client's TCP connection in the backlog", 30)
        listener.close()  # the process gone: the backlog reset, the port refusing
        assert taken(port), "the dead trainer's port is free for another test to take"
        thread.join(timeout=30)
        assert not thread.is_alive(), "the request still waits for a dead trainer"
        (error,) = failed
        assert isinstance(error, PredictTimeout), error
        assert "refused the connection: nothing listens there" in str(error), error
    finally:
        listener.close()
        holder.close()
