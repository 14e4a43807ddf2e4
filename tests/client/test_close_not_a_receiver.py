"""A close after a failure (``close(bye=False)``) waits for nothing of a peer that is not
a receiver (a user trial, htrial17 e3: a client pointed at ``python -m http.server``;
its close waited the whole `failed_close_timeout`, 10 s, though it had warned that the
peer was "not a melissa-trainer receiver"). The peer accepts TCP, so it looks connected:
`CloseWait.not_connected` let it through. These tests set failed_close_timeout to an
hour, far beyond their timeout: before the change they waited it out, and would fail by
their timeout marker; the close's words say it waited for nothing (no clock is read).

Real sockets on 127.0.0.1; `NOT_ZMQ_AFTER` shortened so the tests are quick."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import numpy as np
import pytest
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning, handshake
from melissa_trainer.client.handshake_words import NOT_RECEIVER

pytestmark = pytest.mark.timeout(120)

#: far beyond the tests' timeout (120 s): a close that waits for it fails by the marker
FAILED_CLOSE_TIMEOUT = 3600.0


@pytest.fixture
def silent(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A program that accepts TCP connections (the kernel does, on listen) and never
    speaks ZeroMQ, as ``python -m http.server`` to a ZeroMQ greeting."""
    monkeypatch.setattr(handshake, "NOT_ZMQ_AFTER", 0.3)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize(
    ("count", "batch_bytes", "send_timeout"),
    [(1 << 18, None, 1.0), (256, None, None), (256, 0, None)],
    ids=["1MiB_held_send_failed", "1KB_batched", "1KB_unbatched"],
)
def test_a_close_after_a_failure_does_not_wait_for_a_peer_not_a_receiver(
    silent: str,
    caplog: pytest.LogCaptureFixture,
    count: int,
    batch_bytes: int | None,
    send_timeout: float | None,
) -> None:
    # (sndhwm 1 for the large step only: the small ones must pass, the HELLO queued too)
    more: dict[str, int] = {} if batch_bytes is None else {"batch_bytes": batch_bytes}
    if send_timeout is not None:
        more["sndhwm"] = 1
    tuning = ClientTuning(failed_close_timeout=FAILED_CLOSE_TIMEOUT, **more)
    fields = {"u": ((count,), "float32")}
    client = Client(
        fields, simulation_id=4, endpoints=silent, send_timeout=send_timeout, tuning=tuning
    )
    try:
        if send_timeout is None:  # (small steps: the sends go through, into the queue)
            client.send(0, u=np.ones(count, np.float32))
        else:  # (a large one is held, and the send fails: e3's)
            with pytest.raises(TimeoutError, match="not a melissa-trainer receiver"):
                client.send(0, u=np.ones(count, np.float32))
        # (the close knows what the client knows: once the peer counts as no receiver)
        wait_until(lambda: bool(client._transport.handshakes.not_receivers([silent])), "seen")
    finally:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
            client.close(bye=False)
    said = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(said) == 1, said
    assert f"not delivered to {silent}: {NOT_RECEIVER}" in said[0], said
    assert "a close after a failure does not wait for" in said[0], said
