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
test's and more)."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from keys_receiver_process import established
from waiting import wait_until

from melissa_trainer.client import Predictor, PredictTimeout

LONG = 120.0  # (the request's timeout: longer than the test's)


@pytest.mark.timeout(60)
def test_a_trainer_killed_as_it_accepted_the_connection_fails_the_request_at_once() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
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
        thread.join(timeout=30)
        assert not thread.is_alive(), "the request still waits for a dead trainer"
        (error,) = failed
        assert isinstance(error, PredictTimeout), error
        assert "refused the connection: nothing listens there" in str(error), error
    finally:
        listener.close()
