"""A solver pointed at a port where another program listens and never speaks ZeroMQ (a
user trial: the port of ``python -m http.server``, or any TCP listener that stays
silent) saw one warning at ~3 s, then nothing until its close gave up at close_timeout
(60 s). It cannot be an error sooner: a receiver whose trainer is stopped (SIGSTOP, a
suspended job) is as silent, byte for byte (the kernel accepts TCP for it), and must be
waited for (tests/client/test_handshake_silent_keyed.py). So the wait goes on, and says
that it does: the warning comes again at `handshake.REPEAT_AFTER` s of silence and at
each doubling, with how long the peer has been silent and what ends the wait.

A real silent TCP listener on 127.0.0.1 and a real client; the thresholds shortened
(`NOT_ZMQ_AFTER`, `REPEAT_AFTER`) so that the test is quick. Failed before: one warning
only, whatever the wait."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from melissa_trainer.client import Client, ClientTuning, handshake
from melissa_trainer.client.handshake_words import NOT_RECEIVER

FIELDS = {"u": ((4,), "float32")}


class Said(logging.Handler):
    """The client's warnings of a peer that is not a receiver; `twice` once two came."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.twice = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if NOT_RECEIVER in record.getMessage():
            self.messages.append(record.getMessage())
            if len(self.messages) >= 2:
                self.twice.set()


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Iterator[Said]:
    monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.3)
    monkeypatch.setattr(handshake, "REPEAT_AFTER", 0.6, raising=False)  # (before: none)
    handler = Said()
    logger = logging.getLogger("melissa_trainer.client.client")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
@pytest.mark.timeout(60)
def test_a_silent_peer_is_warned_of_again_while_the_close_waits(said: Said) -> None:
    with socket.socket() as listener:  # (accepts TCP in the kernel, never speaks)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        client = Client(
            FIELDS, simulation_id=3, endpoints=endpoint, tuning=ClientTuning(close_timeout=20.0)
        )
        client.send(0, u=np.ones(4, np.float32))
        failed: list[BaseException] = []

        def close() -> None:
            try:
                client.close()
            except BaseException as exc:
                failed.append(exc)

        thread = threading.Thread(target=close, daemon=True)
        thread.start()
        # (before: one warning, then silence until the close gave up at 20 s)
        assert said.twice.wait(30), said.messages
        assert thread.is_alive(), failed  # the wait goes on (a stopped trainer is as silent)
        first, again = said.messages[:2]
        assert first == (
            f"simulation 3 rank 0: to {endpoint}: {NOT_RECEIVER}; nothing sent to it is delivered"
        )
        assert again.startswith(f"simulation 3 rank 0: to {endpoint}: still no ZeroMQ handshake ")
        assert " s after TCP connected: " in again and NOT_RECEIVER in again, again
        assert again.endswith("; waiting on until send_timeout or close_timeout"), again
        thread.join(40)
        assert not thread.is_alive() and len(failed) == 1, failed
        assert f"{endpoint}: {NOT_RECEIVER}" in str(failed[0]), failed
