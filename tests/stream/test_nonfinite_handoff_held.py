"""Rank 0 hears another rank's hand-off of a NaN failure (`stream.nonfinite_handoff`)
while its receiver is held back by a full buffer, not only when idle
(`IngestLoop._serve_requests`, called between the tries of a blocked put; and at each
pump). Real sockets, ranks 0 and 1 of 2 under ``nonfinite="fail"``.

Before, rank 0 read the hand-offs at its empty polls only, and a rank 0 whose buffer is
full makes none: the failure waited until its reader drained enough for the socket to
empty, so its launcher restarted the simulation late (after the held end-of-study
notice, rank 1 had judged it lacking by then: tests/study/test_end_notice_then_failure.py).
Failed before the fix (the failure never listed while rank 0 stayed blocked).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import running
from receiver_runs import push
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.nonfinite_handoff import HANDOFF_FILE

X = P.FieldSpec("x", np.dtype("<f4"), (2,))


def messages(sid: int, steps: list[int], nan_at: int | None = None) -> list[bytes]:
    """HELLO of `sid`, then one DATA per time step of `steps` (`nan_at` NaN)."""
    out = [P.encode_hello(sid, 0, 1, [X])]
    for t in steps:
        head = P.encode_data_header(sid, t, 0, 1, b"x", P.dtype_code(X.dtype), X.shape, 0, 2, True)
        x = np.array([sid, t], "<f4") if t != nan_at else np.full(2, np.nan, "<f4")
        out.append(head + x.tobytes())
    return out


@pytest.mark.timeout(60)
def test_rank_0_held_by_a_full_buffer_hears_a_hand_off(tmp_path: Path) -> None:
    kw = {"rendezvous_dir": tmp_path, "run_id": "r1", "nonfinite": "fail"}
    with (
        running(FIFOBuffer(1), 0, 2, **kw) as rank0,
        running(FIFOBuffer(100), 1, 2, **kw) as rank1,
    ):
        rank0.report_refusals_to_launcher()  # (a Study's rank 0: it hears)
        push(rank0.endpoint, messages(5, [0, 2, 4, 6]))  # one fits; the thread blocks
        wait_until(lambda: rank0._feeder.waiting, "rank 0 blocked on its full buffer")
        push(rank1.endpoint, messages(5, [1], nan_at=1))
        wait_until(lambda: (tmp_path / f"{HANDOFF_FILE}.1").exists(), "rank 1's hand-off")
        # (refused is listed last, after the failure and its announcement to the other
        # ranks, a file written: waiting on the failure alone read refused too early)
        wait_until(lambda: rank0.ingest.refused, "rank 0 heard it", UNTIL_TEST_TIMEOUT)
        assert rank0._feeder.waiting  # (heard while held, not once idle)
        ((sid, t, why),) = rank0.ingest.nonfinite.failures
        assert (sid, t) == (5, 1) and "receiver of rank 1" in why, why
        assert [s for s, _ in rank0.ingest.refused] == [5]
