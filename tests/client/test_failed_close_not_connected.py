"""A close after a failure (``close(bye=False)``, a ``with`` block left by an exception)
waits for nothing of a receiver that is not connected, as `Client.close` promises
(`melissa_trainer.client.closing`: why that is safe): after a send gave up on a trainer
gone, or on an endpoint where no trainer ever listened, it returns at once and logs what
it dropped and why. Before, it waited the whole `failed_close_timeout` (10 s by default)
for the handshake of a receiver that could not come, for nothing: these tests set it to
an hour, far beyond their timeout, so that such a wait fails them by the timeout marker;
the close's words say it waited for nothing (no clock is read)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from helpers import running
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.send_errors import ReceiverGone

pytestmark = pytest.mark.timeout(120)

COUNT = 1 << 18  # 1 MiB of float32: sent without a copy, held until ZeroMQ lets go
FIELDS = {"u": ((COUNT,), "float32")}
#: far beyond the tests' timeout (120 s): a close that waits for it fails by the marker
FAILED_CLOSE_TIMEOUT = 3600.0


def tuning(batch_bytes: int | None = None) -> ClientTuning:
    more = {} if batch_bytes is None else {"batch_bytes": batch_bytes}
    return ClientTuning(
        disconnected_timeout=0.2, sndhwm=1, failed_close_timeout=FAILED_CLOSE_TIMEOUT, **more
    )


def send_until_gone(client: Client, count: int = COUNT) -> None:
    """Send steps of `count` float32 until a send gives up on the receiver
    (`ReceiverGone`)."""
    u = np.ones(count, np.float32)
    with pytest.raises(ReceiverGone, match="the receiver is unreachable"):
        for t in range(1000):
            client.send(t, u=u)


@contextmanager
def dead_endpoint() -> Iterator[str]:
    """A TCP endpoint that refuses connections: a port bound, not listening, and held
    (a port closed could be taken by another program meanwhile, on a busy machine)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"tcp://127.0.0.1:{held.getsockname()[1]}"


def closed_at_once(client: Client, caplog: pytest.LogCaptureFixture, endpoint: str) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
        client.close(bye=False)  # (a wait for FAILED_CLOSE_TIMEOUT: past the test's timeout)
    said = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(said) == 1, said
    assert f" not delivered to {endpoint}: the receiver is unreachable" in said[0], said
    assert "a close after a failure does not wait for a disconnected receiver" in said[0]


def test_after_a_send_gave_up_on_an_endpoint_never_connected_the_close_is_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with dead_endpoint() as endpoint:
        client = Client(FIELDS, {}, simulation_id=1, endpoints=endpoint, tuning=tuning())
        try:
            send_until_gone(client)
        finally:
            closed_at_once(client, caplog, endpoint)
    assert "no receiver ever accepted a connection at" in caplog.text


@pytest.mark.parametrize(
    ("count", "batch_bytes"),
    [(COUNT, None), (256, None), (256, 0)],
    ids=["1MiB_held", "1KB_batched", "1KB_unbatched"],
)
def test_after_a_send_gave_up_on_a_trainer_gone_the_close_is_at_once(
    caplog: pytest.LogCaptureFixture, count: int, batch_bytes: int | None
) -> None:
    # (1 KB unbatched: nothing held nor batched, so the close went on to the handshake,
    # accepted long ago, and lingered failed_close_timeout on what was queued for the
    # trainer gone; the others gave up at once before too: guards)
    room = FIFOBuffer(10)
    with running(room) as receiver:
        endpoint = str(receiver.endpoint)
        fields = {"u": ((count,), "float32")}
        client = Client(fields, {}, simulation_id=2, endpoints=endpoint, tuning=tuning(batch_bytes))
        client.send(0, u=np.zeros(count, np.float32))
        client.flush()
        wait_until(lambda: room.stats().put == 1, "the receiver's sample")
    try:  # (the receiver stopped: its port refuses the reconnections)
        send_until_gone(client, count)
    finally:
        closed_at_once(client, caplog, endpoint)
    assert "the trainer died, or its node" in caplog.text
