"""A close whose delivery phase (what is queued, the BYE, before any receipt) sees the
trainer take its messages waits on: ``ClientTuning.close_timeout`` bounds that phase
*without progress*, as it bounds the receipt phase (test_close_progress.py), not in all.

A solver that queued many steps then closed gave up ``close_timeout`` after the close
began though its trainer was alive and reading, slowly (a resumed trainer ingesting a
replay at its sample-to-insert pace), and its exit lost what was still queued. Here a
real PULL socket (`slow_pull`: RCVHWM 1, a small kernel buffer) reads one message per
tick of its pace; the client queued 15 MiB of arrays sent without a copy (``array_reuse=
"never"``: ZeroMQ lets go of each once written, the close's sign of progress), far more
than the kernel holds, so the close must wait for dozens of reads, longer than
``close_timeout`` in all. It returns, and every (simulation, step) arrived exactly once.
A receiver that reads nothing still gives up after ``close_timeout``, in the receipt
phase's words (`delivery.no_progress_words`). The C client: tests/c/
test_c_close_delivery_progress.py."""

from __future__ import annotations

import time

import numpy as np
import pytest
from slow_pull import slow_pull

from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.timeout(120)

SID, STEPS = 6, 60
COUNT = 32768  # float64: 256 KiB a step, beyond INLINE_MAX_BYTES (sent without a copy)
PACE = 0.25  # s between two reads: 40 reads at least, 10 s, before the close can end


def queued(endpoint: str, close_timeout: float) -> Client:
    """A client that queued STEPS steps for `endpoint` without waiting for any."""
    tuning = ClientTuning(close_timeout=close_timeout, disconnected_timeout=600.0)
    client = Client(
        {"u": ((COUNT,), np.float64)}, simulation_id=SID, endpoints=endpoint,
        tuning=tuning, array_reuse="never",
    )  # fmt: skip
    for t in range(STEPS):
        client.send(t, u=np.full(COUNT, t, np.float64))
    return client


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
def test_a_close_waits_on_while_the_trainer_takes_its_messages_slowly() -> None:
    with slow_pull(PACE) as receiver:
        client = queued(receiver.endpoint, close_timeout=2.0)
        began = time.monotonic()  # (before the receiver's first read: see `took` below)
        receiver.start()
        client.close()  # (before: TimeoutError "... not delivered within close_timeout=2.0 s")
        took = time.monotonic() - began
        receiver.until_byes(1)
        keys = list(receiver.keys)
    # (a lower bound, set by the receiver's own pace, every read of which came after
    # `began`: the close outlived its close_timeout; deterministic under load)
    assert took > 2.0, took
    assert sorted(keys) == [(SID, t) for t in range(STEPS)], keys  # each once
    assert [b.steps_sent for b in receiver.byes] == [STEPS]


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
def test_a_batched_close_waits_on_while_the_trainer_takes_its_batches_slowly() -> None:
    """The usual solver: small steps, batched (each batch a copy ZeroMQ holds without
    one more, tracked: `Outbox.in_flight`), 8 MiB in 32 batches queued in ZeroMQ."""
    steps, count = 2048, 512  # (4 KiB a step, 64 a batch of 256 KiB)
    with slow_pull(PACE) as receiver:
        tuning = ClientTuning(close_timeout=2.0, batch_bytes=1 << 18, batch_delay=60.0)
        client = Client(
            {"u": ((count,), np.float64)}, simulation_id=SID, endpoints=receiver.endpoint,
            tuning=tuning,
        )  # fmt: skip
        for t in range(steps):
            client.send(t, u=np.full(count, t, np.float64))
        began = time.monotonic()  # (before the receiver's first read, as above)
        receiver.start()
        client.close()  # (before: TimeoutError "... not delivered within close_timeout=2.0 s")
        took = time.monotonic() - began
        receiver.until_byes(1)
        keys = list(receiver.keys)
    assert took > 2.0, took  # (the receiver's pace: as above)
    assert sorted(keys) == [(SID, t) for t in range(steps)], keys[:8]  # each once
    assert [b.steps_sent for b in receiver.byes] == [steps]


def test_a_stuck_trainer_still_ends_the_close_at_close_timeout_in_the_receipt_words() -> None:
    with slow_pull(PACE) as receiver:  # (never started: connected, reads nothing)
        client = queued(receiver.endpoint, close_timeout=1.0)
        with pytest.raises(TimeoutError) as caught:
            client.close()
    said = str(caught.value)
    assert said.startswith(
        f"simulation {SID} rank 0: queued messages not delivered within close_timeout=1.0 s "
        f"to ['{receiver.endpoint}'] (ClientTuning(close_timeout=...) sets it; None waits as "
        f"long as the receivers are connected): the receivers took none of them for "
        f"close_timeout=1.0 s (no progress: ZeroMQ handed nothing on, the receivers "
        f"connected but not reading). A trainer alive but slower than that (loaded, a high "
        f"sample-to-insert ratio): raise the close timeout (ClientTuning.close_timeout; it "
        f"bounds a wait without progress); a trainer paused or stuck: once it runs again, "
        f"run this simulation again with the same simulation id "
        f"(MELISSA_TRAINER_SIMULATION_ID={SID})."
    ), said
