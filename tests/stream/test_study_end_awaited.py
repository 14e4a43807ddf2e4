"""A receiver told that the study has ended does not judge a simulation it refused
itself under ``nonfinite="fail"`` (its failure handed to rank 0): it awaits rank 0's
launcher (`stream.study_end`). Real sockets, rank 1 of 2, rank 0's word that it hears
hand-offs written as a Study's rank 0 does (`NonfiniteHandoff.listen`).

The bug (tests/study/test_end_notice_then_failure.py, second test, end to end): rank 1
judged such a simulation lacking once its grace passed and failed with
`StudyLacksError` ("none is run again"), though rank 0's launcher was about to restart
it, so one bad sample failed a study allowed a restart. Now the restart's data ends the
stream, and so does the simulation's ABANDON (given up); one that rank 1 lacks for
another reason is still judged at once, the awaited one named apart.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import running
from receiver_runs import failure, push
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.control import send_study_end
from melissa_trainer.stream.nonfinite_handoff import HANDOFF_FILE, NonfiniteHandoff
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverTuning

X = P.FieldSpec("x", np.dtype("<f4"), (2,))
#: a grace short enough for a unit test (the default is 2 s)
FAST = ReceiverTuning(study_end_grace=0.05)


def frames(sid: int, nan_at: int | None = None) -> list[bytes]:
    """Simulation `sid`'s messages to rank 1 of 2 (steps 1 and 3 of 4, HELLO to BYE);
    step `nan_at` is NaN."""
    out = [P.encode_hello(sid, 0, 1, [X])]
    for t in (1, 3):
        head = P.encode_data_header(sid, t, 0, 1, b"x", P.dtype_code(X.dtype), X.shape, 0, 2, True)
        x = np.array([sid, t], "<f4") if t != nan_at else np.full(2, np.nan, "<f4")
        out.append(head + x.tobytes())
    out.append(P.encode_bye(sid, 0, 1, 2))
    return out


def refused_then_told(rec: Receiver, directory: Path) -> None:
    """Simulation 0 complete on `rec`, simulation 1's step 3 NaN (refused, handed to rank
    0), then the STUDY_END naming both; returns once `rec` has been idle 20 graces past
    it, not judging simulation 1 (the wait of an event: its idle clock)."""
    NonfiniteHandoff(directory, "r1", 0, 2).listen()  # (rank 0 hears: a Study's)
    push(rec.endpoint, frames(0) + frames(1, nan_at=3))
    # (both: the receiver's thread writes the hand-off file, then records the failure;
    # an assert of the second once the first was seen failed in a run of the suite)
    wait_until(
        lambda: (directory / f"{HANDOFF_FILE}.1").exists() and rec.ingest.nonfinite.failed_now(1),
        "the hand-off and simulation 1 refused",
        UNTIL_TEST_TIMEOUT,
    )
    send_study_end([rec.endpoint], [0, 1])
    wait_until(lambda: rec.study_end.finished == [0, 1], "the STUDY_END read")
    since = rec.ingest.messages
    wait_until(
        lambda: rec._idle.idle_seconds(since) > 20 * FAST.study_end_grace or failure(rec),
        "20 graces of silence",
    )
    assert failure(rec) is None, failure(rec)  # (before the fix: StudyLacksError)
    assert not rec.ended


@pytest.mark.timeout(60)
def test_a_simulation_refused_here_is_awaited_and_its_restart_ends_the_stream(
    tmp_path: Path,
) -> None:
    buf = FIFOBuffer(100)
    kw = {"rendezvous_dir": tmp_path, "run_id": "r1", "nonfinite": "fail"}
    with running(buf, 1, 2, tuning=FAST, expected_simulations=2, **kw) as rec:
        refused_then_told(rec, tmp_path)
        push(rec.endpoint, frames(1))  # the restart (its HELLO: attempt 2), finite
        wait_until(lambda: rec.ended or failure(rec), "the end of the stream", UNTIL_TEST_TIMEOUT)
        assert failure(rec) is None, failure(rec)
        assert rec.ingest.nonfinite.attempt(1) == 2


@pytest.mark.timeout(60)
def test_a_simulation_refused_here_then_given_up_ends_the_stream(tmp_path: Path) -> None:
    buf = FIFOBuffer(100)
    kw = {"rendezvous_dir": tmp_path, "run_id": "r1", "nonfinite": "fail"}
    with running(buf, 1, 2, tuning=FAST, expected_simulations=2, **kw) as rec:
        refused_then_told(rec, tmp_path)
        push(rec.endpoint, [P.encode_abandon(1)])  # rank 0's launcher gave it up
        wait_until(lambda: rec.ended or failure(rec), "the end of the stream", UNTIL_TEST_TIMEOUT)
        assert failure(rec) is None, failure(rec)


@pytest.mark.timeout(60)
def test_a_simulation_lacked_for_another_reason_is_still_judged(tmp_path: Path) -> None:
    """Simulation 2 (never seen here) is lacked for good: judged at once past the grace,
    naming it alone, not simulation 1, which is awaited."""
    buf = FIFOBuffer(100)
    kw = {"rendezvous_dir": tmp_path, "run_id": "r1", "nonfinite": "fail"}
    with running(buf, 1, 2, tuning=FAST, expected_simulations=3, **kw) as rec:
        NonfiniteHandoff(tmp_path, "r1", 0, 2).listen()
        push(rec.endpoint, frames(0) + frames(1, nan_at=3))
        wait_until(lambda: rec.ingest.nonfinite.failed_now(1), "simulation 1 refused")
        send_study_end([rec.endpoint], [0, 1, 2])
        wait_until(lambda: failure(rec) is not None, "rank 1's failure", UNTIL_TEST_TIMEOUT)
        message = failure(rec)
    assert message is not None
    assert "lacks the data of 1 of the 3 simulations" in message, message
    assert "(simulation 2; none is run again)" in message, message
