"""A Python client sending fast into a program that is not a receiver (TCP accepted, no
ZeroMQ handshake: an HTTP server's port), its sends never blocking, is warned of it
while it sends (`send_wait.SendWait.look`: the sends look at the sockets' monitors now
and then), not only once a send blocks or at its close (`handshake.NOT_RECEIVER`,
tests/client/test_not_a_receiver.py). Before, the warning came only from a wait: a
client whose queue never filled sent on, everything dropped, and heard nothing.

`NOT_ZMQ_AFTER` is 0 here (a peer counts as not a receiver when first seen without a
handshake) and `LOOK_EVERY` short, so the test is quick; the sends are small and the
high-water mark above their number, so that no send blocks."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import numpy as np
import pytest

from melissa_trainer.client import Client, ClientTuning, handshake, send_wait
from melissa_trainer.client.handshake_words import NOT_RECEIVER

pytestmark = pytest.mark.timeout(60)

FIELDS = {"u": ((4,), "float32")}
#: sends at most before the warning (each of 16 bytes: the queue holds them all)
MAX_SENDS = 200_000


@pytest.fixture
def silent() -> Iterator[str]:
    """A program that accepts TCP connections (the kernel's backlog) and never speaks."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"


def test_a_client_sending_fast_into_a_program_that_is_not_a_receiver_is_warned(
    silent: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.0)
    monkeypatch.setattr(send_wait, "LOOK_EVERY", 0.01, raising=False)  # (before: none)
    # (a queue of more messages than MAX_SENDS: no send can block, and so no wait reads
    # the monitors; the log would say a blocked send's notice)
    tuning = ClientTuning(sndhwm=2 * MAX_SENDS, close_timeout=1.0)
    client = Client(FIELDS, simulation_id=9, endpoints=silent, tuning=tuning)
    u = np.ones(4, np.float32)
    try:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
            sends = 0
            while NOT_RECEIVER not in caplog.text and sends < MAX_SENDS:
                client.send(sends, u=u)
                sends += 1
            warned = [r.getMessage() for r in caplog.records if NOT_RECEIVER in r.getMessage()]
    finally:
        # (nothing can be delivered, and silence is waited for until close_timeout: a
        # stopped trainer is as silent; not a refusal, which a ValueError would be)
        with pytest.raises(TimeoutError, match="not a melissa-trainer receiver"):
            client.close()
    # (said while it sent, before the close, which says it too; before: only the close)
    said = f"simulation 9 rank 0: to {silent}: {NOT_RECEIVER}; nothing sent to it is delivered"
    assert warned == [said], (
        sends,
        warned,
    )
    assert "sending time step" not in caplog.text  # (no send blocked: no wait's notice)
