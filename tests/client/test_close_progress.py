"""A close whose receipt rounds see the trainer progress waits on (user trial htrial24,
F1): ``ClientTuning.close_timeout`` bounds a wait *without progress*, not the whole wait.

A resumed trainer that takes a replay of hundreds of steps ingests them at its
sample-to-insert pace; its receipts say "not yet" while the steps it holds grow. Before,
the close gave up ``close_timeout`` after its first question ("a trainer paused that
long?"), and exiting then lost what was still queued on the solver's side. Here a real
receiver on a FIFO of 2 is drained one sample per two answered questions (events, not
sleeps): the close needs longer than ``close_timeout`` in all (each "not yet" is held by
the receiver for `RECEIPT_HOLD`, 0.5 s, so 10 samples take 10 s at least) but progresses
all along; it returns, and every step was received exactly once. A receiver that makes no
progress still gives up at ``close_timeout``, saying how many steps are not confirmed,
that exiting loses those still queued, and the fix. The C client: tests/c/
test_c_close_progress.py.

UNBATCHED: each step its own DATA message (``batch_bytes=0``). The receipts' progress is
the steps the receiver holds (`ReceiptReply.steps`); those of a BATCH, counted once put
into the buffer as it drains (`stream.ingested`): test_close_batched_progress.py."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from slow_drain import drain_slowly

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client.tuning import ClientTuning

pytestmark = pytest.mark.timeout(180)

STEPS = 12
SID = 5


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
def test_a_close_waits_on_while_the_trainer_ingests_slowly(external: Path) -> None:
    buffer = FIFOBuffer(2)
    taken: list[tuple[int, int]] = []
    with running(buffer=buffer, rendezvous_dir=external, run_id="run-a") as receiver:
        tuning = ClientTuning(close_timeout=4.0, batch_bytes=0)  # (`UNBATCHED`)
        client = Client(simulation_id=SID, fields={"u": ((4,), np.float64)}, tuning=tuning)
        for t in range(STEPS):
            client.send(t, u=np.full(4, t, np.float64))
        closed = threading.Event()
        drainer = drain_slowly(receiver, buffer, taken, closed, STEPS)
        client.close()  # (before: TimeoutError "... a trainer paused that long?")
        answered = receiver._follow.answered  # type: ignore[union-attr]
        closed.set()  # (the rest, the last ones the receiver holds: taken at once)
        drainer.join(60)
        finished = SID in receiver.completed()
    # (the close needed more questions than close_timeout holds: each held 0.5 s)
    assert answered > 2 * 4.0 / 0.5, answered
    # the invariant: every (simulation, step) received exactly once
    assert sorted(taken) == [(SID, t) for t in range(STEPS)], taken
    assert finished


def test_a_stuck_receiver_still_times_out_at_close_timeout_saying_what_is_lost(
    external: Path,
) -> None:
    buffer = FIFOBuffer(2)  # (never drained: the receiver holds 2 and reads no more)
    with running(buffer=buffer, rendezvous_dir=external, run_id="run-a") as receiver:
        tuning = ClientTuning(close_timeout=1.5, batch_bytes=0)
        client = Client(simulation_id=SID, fields={"u": ((4,), np.float64)}, tuning=tuning)
        for t in range(STEPS):
            client.send(t, u=np.full(4, t, np.float64))
        with pytest.raises(TimeoutError) as caught:
            client.close()
        held = int(receiver.ingest.sims[SID].completed)
    assert 0 < held < STEPS, held
    assert str(caught.value) == (
        f"simulation {SID} rank 0: the trainer did not confirm this simulation's BYE: its "
        f"receivers [0] ingested none of its steps for ClientTuning.close_timeout=1.5 s (no "
        f"progress; {STEPS - held} of the {STEPS} steps this rank sent them not confirmed). "
        f"Exiting now loses those still queued here. A trainer alive but slower than that "
        f"(loaded, a high sample-to-insert ratio): raise the close timeout "
        f"(ClientTuning.close_timeout; it bounds a wait without progress); a trainer paused "
        f"or stuck: once it runs again, run this simulation again with the same simulation "
        f"id (MELISSA_TRAINER_SIMULATION_ID={SID}) if the trainer does not name it finished"
    )
