"""Two real ranks (gloo) at the end of a OneCycleLR sized short of the stream: every
rank stops at the schedule's last step with `ScheduleEnded`, the checkpoint of that
step written by both together (the failure path's collective save), and the launch
ends (no rank waits for another). A scheduler that raises at its step (its end
unreadable, or a failure on one rank only) is held until the ranks' next stop agreement,
where both save together (`trainer.schedule_end`). tests/trainer/test_schedule_end.py
has one rank's."""

from __future__ import annotations

from pathlib import Path

import pytest
from two_ranks import launch_two_ranks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.e2e]

SCRIPT = Path(__file__).parents[1] / "scripts" / "schedule_end_ranks.py"


def test_every_rank_stops_at_the_schedules_end_with_its_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = launch_two_ranks(SCRIPT, str(out))
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    ended = [(out / f"ended_{rank}.txt").read_text().split() for rank in (0, 1)]
    assert ended == [["ScheduleEnded", "5"], ["ScheduleEnded", "5"]], text[-3000:]
    assert (out / "checkpoints" / "checkpoint-5").is_dir(), text[-3000:]
    assert "OneCycleLR(total_steps=5)" in text and "max_steps" in text, text[-3000:]


def test_every_rank_stops_where_an_unreadable_schedule_raises(tmp_path: Path) -> None:
    """A OneCycleLR inside a SequentialLR raises at step 8 on both ranks, after that
    step's update (the last of the window 7-8, whose successor's agreement had started):
    both hold it, train on to step 10, where the next agreement carries it, and write
    checkpoint-10 together (no rank can tell that the other's raised at the same step
    without a collective per step). Failed before: torch's ValueError on each rank, no
    checkpoint."""
    out = tmp_path / "out"
    done = launch_two_ranks(SCRIPT, str(out), "sequential")
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    ended = [(out / f"ended_{rank}.txt").read_text().split() for rank in (0, 1)]
    assert ended == [["ScheduleEnded", "10"], ["ScheduleEnded", "10"]], text[-3000:]
    assert (out / "checkpoints" / "checkpoint-10").is_dir(), text[-3000:]
    said = (out / "said_0.txt").read_text()
    assert "SequentialLR" in said and "raised at its step 8" in said, said
    assert "Tried to step 6 times" in said, said


@pytest.mark.parametrize("mode", ["one_rank", "one_rank_last"])
def test_a_scheduler_that_raises_on_one_rank_stops_both_with_a_checkpoint(
    tmp_path: Path, mode: str
) -> None:
    """A LambdaLR whose lambda raises an OSError on rank 1 only, at its step 4 (the last
    of the window 3-4): rank 1 holds it, both train on to step 6 (the next agreement
    that carries it: the loop's, or with max_steps 6 the one after the loop) and write
    checkpoint-6 together; rank 1 raises `ScheduleEnded` naming the step it raised at
    and its OSError, rank 0 `RankFailed` naming rank 1 and its error; both exit 1.
    Failed before: rank 1 went straight into the collective save at step 4 while rank 0
    was in its next step: gloo aborted rank 1 (EnforceNotMet, "Received data size
    doesn't match"), its OSError said nowhere, rank 0 "left no note"; with max_steps 6
    and no agreement after the loop, rank 1 ended as if nothing had failed."""
    out = tmp_path / "out"
    done = launch_two_ranks(SCRIPT, str(out), mode)
    text = done.stdout + done.stderr
    assert done.returncode == 1, text[-3000:]
    assert "EnforceNotMet" not in text and "SIGABRT" not in text, text[-3000:]
    ended = [(out / f"ended_{rank}.txt").read_text().split() for rank in (0, 1)]
    assert ended == [["RankFailed", "6"], ["ScheduleEnded", "6"]], text[-3000:]
    assert (out / "checkpoints" / "checkpoint-6").is_dir(), text[-3000:]
    own = (out / "said_1.txt").read_text()
    assert "LambdaLR raised at its step 4" in own, own
    assert "OSError: rank-local failure in the user's scheduler" in own, own
    assert "checkpoint-6 holds this step" in own, own
    other = (out / "said_0.txt").read_text()
    assert other.startswith("rank 1 failed: ScheduleEnded: "), other
    assert "OSError: rank-local failure in the user's scheduler" in other, other
    note = (out / ".rank-failures" / "rank-1").read_text()
    assert "OSError: rank-local failure" in note, note
    assert "Traceback" in text and "raise OSError" in text, text[-3000:]  # (the user's)


def test_schedules_ending_at_different_steps_are_refused_before_training(
    tmp_path: Path,
) -> None:
    """A OneCycleLR of 5 steps on rank 0 and 7 on rank 1 (a total counted per rank):
    both ranks refuse it before the first step, naming each rank's end. Before, rank 0
    stopped at step 5 into the end's collective save while rank 1 went on training."""
    out = tmp_path / "out"
    done = launch_two_ranks(SCRIPT, str(out), "unequal")
    text = done.stdout + done.stderr
    assert done.returncode == 1, text[-3000:]
    ended = [(out / f"ended_{rank}.txt").read_text().split() for rank in (0, 1)]
    assert ended == [["ScheduleEnded", "0"], ["ScheduleEnded", "0"]], text[-3000:]
    for rank in (0, 1):
        said = (out / f"said_{rank}.txt").read_text()
        assert "rank 0: step 5, rank 1: step 7" in said and "total_steps" in said, said
