"""Two real ranks (gloo) at the end of a OneCycleLR sized short of the stream: every
rank stops at the schedule's last step with `ScheduleEnded`, the checkpoint of that
step written by both together (the failure path's collective save), and the launch
ends (no rank waits for another). tests/trainer/test_schedule_end.py has one rank's."""

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
    step's update: both count it and write checkpoint-8 together (the collective save
    meets). Failed before: torch's ValueError on each rank, no checkpoint."""
    out = tmp_path / "out"
    done = launch_two_ranks(SCRIPT, str(out), "sequential")
    text = done.stdout + done.stderr
    assert done.returncode != 0, text[-3000:]
    ended = [(out / f"ended_{rank}.txt").read_text().split() for rank in (0, 1)]
    assert ended == [["ScheduleEnded", "8"], ["ScheduleEnded", "8"]], text[-3000:]
    assert (out / "checkpoints" / "checkpoint-8").is_dir(), text[-3000:]
    assert "SequentialLR raised" in text and "Tried to step 6 times" in text, text[-3000:]
