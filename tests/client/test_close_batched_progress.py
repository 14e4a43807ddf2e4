"""A close whose last steps came as one BATCH sees the trainer progress while that batch
drains (the gap test_close_progress.py left: its ``UNBATCHED``).

The receiver marks a BATCH's steps when it decodes it, before its samples wait for room
in the buffer; its receipts counted those, so a close with the default batching (64 KiB:
all 12 steps here in one BATCH) was told all of them at its first question and nothing
more while the batch drained, and gave up at ``close_timeout`` though the trainer took
a sample every two questions. Now a "not yet" receipt says the steps put into the
buffer (`stream.ingested`): the close waits on and returns, every step received once.
The same receiver and pace as test_close_progress.py (events, not sleeps).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from test_close_progress import SID, STEPS, drain_slowly

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.ingested import Draining

pytestmark = pytest.mark.timeout(180)


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
def test_a_batched_close_waits_on_while_its_batch_drains(external: Path) -> None:
    buffer = FIFOBuffer(2)
    taken: list[tuple[int, int]] = []
    with running(buffer=buffer, rendezvous_dir=external, run_id="run-a") as receiver:
        tuning = ClientTuning(close_timeout=4.0)  # (the default batching: one BATCH)
        assert tuning.batch_bytes >= STEPS * 4 * 8
        client = Client(simulation_id=SID, fields={"u": ((4,), np.float64)}, tuning=tuning)
        for t in range(STEPS):
            client.send(t, u=np.full(4, t, np.float64))
        closed = threading.Event()
        drainer = drain_slowly(receiver, buffer, taken, closed, STEPS)
        client.close()  # (before: TimeoutError "... ingested none of its steps for ...")
        answered = receiver._follow.answered  # type: ignore[union-attr]
        closed.set()
        drainer.join(60)
        finished = SID in receiver.completed()
    assert answered > 2 * 4.0 / 0.5, answered  # (it took longer than close_timeout)
    # the invariant: every (simulation, step) received exactly once
    assert sorted(taken) == [(SID, t) for t in range(STEPS)], taken
    assert finished


def test_draining_counts_what_was_put_since_the_start_capped_at_what_is_marked() -> None:
    put = [7]
    draining = Draining(lambda: put[0])
    assert draining.steps(1, 5) == 5  # (nothing started: marked is held)
    draining.start(1, 3)  # (3 marked before; then 10 more, of which none put yet)
    assert draining.steps(1, 13) == 3
    put[0] = 11
    assert draining.steps(1, 13) == 7
    assert draining.steps(2, 4) == 4  # (another simulation's samples are all in)
    put[0] = 30  # (its batch drained, then others' samples)
    assert draining.steps(1, 13) == 13
    assert Draining().steps(1, 13) == 13  # (no put count: marked is held)
