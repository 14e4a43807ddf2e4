"""Rank 0's excuse (``explained`` in its progress file, `study.progress`) stays fresh
whatever the launcher's poll_interval and however slow its summary: `ProgressFile.beat`
rewrites it (and ``alive``, which `study.starvation.rank0_excuse` ages) every `REFRESH`
s from a thread of its own (`StudyEndNotice`), while the full `update` waits for the
next poll. Before, the file was rewritten only at a poll: with poll_interval=30 (a
Slurm user's) a true "jobs queued" read stale 15 s after each write, and another rank
fell back to the start-up allowance, then failed at stall_timeout while rank 0 still
explained the silence. A rank 0 that no longer beats (dead, stopped) excuses nothing
once `EXCUSE_AGE` passes."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.launcher import LauncherTuning
from melissa_trainer.study.end_notice import StudyEndNotice
from melissa_trainer.study.progress import EXCUSE_AGE, REFRESH, ProgressFile, read_progress
from melissa_trainer.study.progress_words import rank0_excuse

QUEUED = "the launcher waits for 1 job queued by the scheduler (not started yet)"
POLL = 30.0  # a Slurm user's poll_interval: longer than EXCUSE_AGE
T0 = 1_000_000.0  # the wall clock at the first write


class Clock:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class QueuedLauncher:
    """Rank 0's launcher, one job queued (its excuse `explained`, None once started);
    when `slow`, its second `summary` and later wait on `release` (a slow ``squeue``
    under the launcher's lock), the second setting `blocked`."""

    def __init__(self, poll_interval: float = POLL, slow: bool = False) -> None:
        self.tuning, self.slow = LauncherTuning(poll_interval=poll_interval), slow
        self.explained: str | None = QUEUED
        self.blocked, self.release = threading.Event(), threading.Event()
        self.summaries = 0
        self.beats = 0  # calls of silence_explained
        self.beaten = threading.Event()  # set at the third call

    def data_backpressured(self) -> bool:
        return False

    def silence_explained(self, idle: float = 0.0) -> str | None:
        self.beats += 1
        if self.beats >= 3:
            self.beaten.set()
        return self.explained

    def jobs_alive(self) -> int:
        return 1

    def summary(self) -> dict[str, float]:
        self.summaries += 1
        if self.slow and self.summaries >= 2:
            self.blocked.set()
            self.release.wait(60.0)
        return {"running": 1.0, "pending": 3.0, "exited": 0.0, "finished": 0.0}

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return False, 2

    def check(self) -> None:
        pass

    def ended(self) -> None:
        pass

    @property
    def done(self) -> bool:
        return False


def excuse_at(tmp_path: Path, wall: float) -> str | None:
    """Another rank's reading of rank 0's file at wall-clock `wall`, without fallback."""
    return rank0_excuse(read_progress(tmp_path, "run1"), 900.0, None, now=wall)


def test_a_live_rank_0_with_a_long_poll_keeps_its_excuse_fresh(tmp_path: Path) -> None:
    """Written at a poll (t=0), not again until the next (t=30): its beats every
    REFRESH s keep the excuse accepted 20 s after that write, while it is true. Failed
    before (no beat: refused at 20 s)."""
    launcher: Any = QueuedLauncher()
    clock = Clock()
    progress = ProgressFile(tmp_path, "run1", wall=clock)
    assert progress.update(launcher, now=0.0)
    written = read_progress(tmp_path, "run1")
    assert written is not None
    for t in (REFRESH, 2 * REFRESH, 3 * REFRESH, 4 * REFRESH):  # (the beat thread's)
        clock.now = T0 + t
        assert progress.beat(launcher, now=t)
    assert excuse_at(tmp_path, T0 + 20.0) == f"rank 0's launcher says: {QUEUED}"
    after = read_progress(tmp_path, "run1")
    assert after is not None and after["written"] == written["written"]  # (counts' age)
    assert after["alive"] == T0 + 4 * REFRESH
    assert EXCUSE_AGE < 20.0 < POLL
    old = {"explained": QUEUED, "written": written["written"]}  # (the poll's write alone)
    assert rank0_excuse(old, 900.0, None, now=T0 + 20.0) is None


def test_a_rank_0_that_stopped_beating_is_refused(tmp_path: Path) -> None:
    """Its last beat older than EXCUSE_AGE (a dead or stopped rank 0): not known."""
    launcher: Any = QueuedLauncher()
    clock = Clock()
    progress = ProgressFile(tmp_path, "run1", wall=clock)
    assert progress.update(launcher, now=0.0)
    clock.now = T0 + REFRESH
    assert progress.beat(launcher, now=REFRESH)
    assert excuse_at(tmp_path, T0 + REFRESH + EXCUSE_AGE) is not None
    assert excuse_at(tmp_path, T0 + REFRESH + EXCUSE_AGE + 0.5) is None


def test_a_beat_withdraws_an_excuse_no_longer_true(tmp_path: Path) -> None:
    """The job started between two polls: the next beat writes no excuse (as rank 0's
    own watch reads it), once; then nothing while none is set."""
    launcher: Any = QueuedLauncher()
    clock = Clock()
    progress = ProgressFile(tmp_path, "run1", wall=clock)
    assert progress.update(launcher, now=0.0)
    assert not progress.beat(launcher, now=1.0)  # (written a second ago: nothing to do)
    launcher.explained = None
    clock.now = T0 + 2.0
    assert progress.beat(launcher, now=2.0)
    assert excuse_at(tmp_path, T0 + 2.0) is None
    assert not progress.beat(launcher, now=2.0 + 2 * REFRESH)
    assert progress.update(launcher, now=3.0)  # (its counts follow at the next poll)


def test_an_older_file_without_alive_is_aged_by_written() -> None:
    said = {"explained": QUEUED, "written": T0}
    assert rank0_excuse(said, 900.0, None, now=T0 + EXCUSE_AGE) is not None
    assert rank0_excuse(said, 900.0, None, now=T0 + EXCUSE_AGE + 1.0) is None


@pytest.mark.timeout(30)
def test_the_notice_beats_while_its_poll_waits_in_a_slow_summary(tmp_path: Path) -> None:
    """The notice's thread blocked in its second poll's `summary` (the launcher's lock,
    a slow squeue): its beat thread still rewrites the excuse and ``alive``."""
    launcher: Any = QueuedLauncher(poll_interval=0.01, slow=True)
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1"}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))  # (rank 0 alone)
    notice = StudyEndNotice.start(launcher, tmp_path, "run1", beat_period=0.01)
    try:
        assert launcher.blocked.wait(20.0)  # (the first poll wrote the file)
        first = read_progress(tmp_path, "run1")
        assert first is not None and first["explained"] == QUEUED
        launcher.beaten.clear()
        launcher.beats = 0
        assert launcher.beaten.wait(20.0)  # (three beats: the poll thread is blocked)
        later = read_progress(tmp_path, "run1")
        assert launcher.summaries == 2
        assert later is not None and later["explained"] == QUEUED
        assert later["alive"] > first["alive"] and later["written"] == first["written"]
    finally:
        notice.stop()
        launcher.release.set()
