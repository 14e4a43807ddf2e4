"""A study that fails for good tells every rank at once (`study.progress`: rank 0's
study-end thread publishes the launcher's error as ``failed``; `study.starvation`:
another rank's wait for a batch ends with it, led by the launcher's words), and what a
rank quotes of rank 0's state says how old it is. The e2e test of the hang it ends:
tests/trainer/test_starved_study_fails.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.buffers import BufferStats
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.starvation_watch import StarvationWatch, StarvedRankError
from melissa_trainer.study.end_notice import StudyEndNotice
from melissa_trainer.study.progress import ProgressFile, read_progress
from melissa_trainer.study.progress_words import failed_words, rank0_words

#: the launcher's words of a user trial (2026-12-01)
GAVE_UP = (
    "simulation 13 failed 3 times (exit codes [3, 3, 3]), and 7 simulations failed for "
    "good, more than the 6 that LauncherTuning.min_finished_fraction=0.5 allows in a "
    "study of 12\nsim-13.log: ..."
)


class FailedLauncher:
    """Rank 0's launcher once it gave up: nothing alive, 4 simulations left, held back."""

    done = False

    def __init__(self, error: str | None = GAVE_UP) -> None:
        self.error = error
        self.tuning = type("Tuning", (), {"poll_interval": 0.01})()

    def check(self) -> None:
        if self.error is not None:
            raise LauncherError(self.error)

    def data_backpressured(self) -> bool:
        return True

    def silence_explained(self, idle: float = 0.0) -> str | None:
        return None

    def jobs_alive(self) -> int:
        return 0

    def summary(self) -> dict[str, float]:
        return {"running": 0.0, "pending": 4.0, "exited": 0.0, "finished": 6.0}

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return False, 2


def watch_of(tmp_path: Path, put: list[int]) -> StarvationWatch:
    """Rank 1's watch as `study_watch` builds it, reading rank 0's file (no stall
    timeout: only the study's failure can end its wait)."""
    return StarvationWatch(
        1, 2, None, lambda idle: None, lambda: "", lambda: put[0],
        lambda: BufferStats(size=0, capacity=8, put=put[0], got=0, evicted=0),
        failed=lambda wanted: failed_words(read_progress(tmp_path, "run1"), 1, 2, wanted),
    )  # fmt: skip


def test_rank_0_publishes_the_failure_and_another_ranks_wait_ends_with_it(
    tmp_path: Path,
) -> None:
    launcher: Any = FailedLauncher()
    progress = ProgressFile(tmp_path, "run1")
    assert progress.update(launcher, now=0.0)  # before the failure: its counts
    put = [0]
    w = watch_of(tmp_path, put)
    w.check(4, 0.02)  # no failure published: the wait goes on
    assert progress.failed(launcher, LauncherError(GAVE_UP))
    said = read_progress(tmp_path, "run1")
    assert said is not None and said["failed"] == GAVE_UP and said["pending"] == 4
    put[0] = 3  # samples coming (a wait not starved) end with it as well
    with pytest.raises(SourceError) as info:
        w.check(4, 0.02)
    assert not isinstance(info.value, StarvedRankError)
    words = str(info.value)
    assert words.startswith(f"the simulation study failed: {GAVE_UP}\n(rank 1 of 2 ")
    assert "while it waited for a batch of 4 samples" in words
    assert "Fix: a smaller batch_size" not in words  # (no starvation advice)
    assert json.loads((tmp_path / "study_progress.json").read_text())["failed"] == GAVE_UP


def test_a_progress_without_a_failure_says_none() -> None:
    assert failed_words(None, 1, 2, 4) is None
    assert failed_words({"failed": None, "written": 0.0}, 1, 2, 4) is None
    words = failed_words({"failed": "x", "written": 100.0}, 1, 2, 4, now=130.0)
    assert words is not None and "rank 0's progress file, 30 s ago" in words


def test_the_study_end_thread_publishes_the_launchers_failure_at_once(tmp_path: Path) -> None:
    """Before, the thread returned at the failure, its last word left as it was: rank 1
    waited for its stall_timeout, quoting rank 0's state of minutes before."""
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1"}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    launcher: Any = FailedLauncher()
    notice = StudyEndNotice.start(launcher, tmp_path, "run1")
    try:
        wait_until(
            lambda: (read_progress(tmp_path, "run1") or {}).get("failed"),
            timeout=UNTIL_TEST_TIMEOUT,
        )
    finally:
        notice.stop()
    said = read_progress(tmp_path, "run1")
    assert said is not None and said["failed"] == GAVE_UP and not notice.told.is_set()


def test_words_quoted_from_rank_0s_file_say_how_old_they_are() -> None:
    """A user trial's StarvedRankError quoted "waited for room in its buffer for 4 s"
    from a file written 10 minutes before, as if current."""
    now = time.time()
    state = {"backpressured_for": 4.0, "jobs_alive": 0, "pending": 4, "finished": 6}
    old = rank0_words({**state, "written": now - 600.0}, 1, now=now)
    assert old.startswith("As rank 0 last published it, 600 s ago: Rank 0's receiver has ")
    fresh = rank0_words({**state, "written": now - 2.0}, 1, now=now)
    assert fresh.startswith("Rank 0's receiver has waited for room in its buffer for 4 s")
