"""A close behind a queue of small steps sent unbatched sees the trainer take them:
one in `marks.MARK_EVERY` is tracked (`marks.Marks`), so its release is progress, as a
batch's is (test_close_delivery_progress.py).

Before, ZeroMQ copied each and let go of it without a sign: the close saw nothing from
the BYE's acceptance to its release, all of them read, and gave up ``close_timeout``
after the last sign though the trainer was reading ("queued messages not delivered
within close_timeout=2.0 s ... the receivers took none of them"). Here a real PULL
socket (`slow_pull`: RCVHWM 1, a small kernel buffer) reads one message every PACE s;
the client (``batch_bytes=0``) queued STEPS small steps of 56 KB (copied: under
`field_part.INLINE_MAX_BYTES`), more than the kernel holds, which take several close
timeouts to read. The close returns, and every step arrived once. The C client:
tests/c/test_c_close_unbatched_progress.py."""

from __future__ import annotations

import time

import numpy as np
import pytest
from slow_pull import slow_pull

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.field_part import INLINE_MAX_BYTES
from melissa_trainer.client.marks import MARK_BYTES, MARK_EVERY

pytestmark = pytest.mark.timeout(120)

SID, STEPS = 9, 300
COUNT = 7000  # float64: 56 KB a step, one frame with its header (copied by ZeroMQ)
PACE = 0.05  # s between two reads: 15 s for all, a sign every MARK_EVERY reads (0.8 s)
CLOSE_TIMEOUT = 2.0


@pytest.mark.e2e  # (it waits 5-20 s of real bounds: the outer tier; architecture.md)
def test_a_close_behind_small_unbatched_steps_waits_while_the_trainer_reads() -> None:
    assert COUNT * 8 < INLINE_MAX_BYTES and MARK_EVERY * PACE < CLOSE_TIMEOUT / 2
    assert MARK_EVERY * COUNT * 8 >= MARK_BYTES  # (so one in MARK_EVERY is a mark)
    with slow_pull(PACE) as receiver:
        tuning = ClientTuning(
            close_timeout=CLOSE_TIMEOUT, disconnected_timeout=600.0, batch_bytes=0
        )
        client = Client(
            {"u": ((COUNT,), np.float64)}, simulation_id=SID, endpoints=receiver.endpoint,
            tuning=tuning,
        )  # fmt: skip
        for t in range(STEPS):
            client.send(t, u=np.full(COUNT, t, np.float64))
        receiver.start()
        began = time.monotonic()
        client.close()  # (before: TimeoutError "... within close_timeout=2.0 s ...")
        took = time.monotonic() - began
        receiver.until_byes(1)
        keys = list(receiver.keys)
    assert took > CLOSE_TIMEOUT, took  # (set by the receiver's pace)
    assert sorted(keys) == [(SID, t) for t in range(STEPS)], keys[:8]  # each once
