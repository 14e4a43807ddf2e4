"""The certain deadlock's grace scales with what rank 0's training does
(`melissa_trainer.study.starvation.DeadlockCheck`): a rank 0 busy with slow steps, whose
reads of its buffer come one window apart, is not called deadlocked; one whose reads
stop is, within the bound the module states; an older rank 0's progress (without the
reads) keeps the fixed grace. Rank 0 publishes its reads (`study.progress`) from its
starvation watch's `ReadClock` (`stream.read_clock`).

Every clock here is a number the test sets: rank 0's writes are simulated every
`REFRESH` s, as `ProgressFile` rewrites its file while its receiver is held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_starved_deadlock import stuck  # (rank 0's progress in the deadlock's state)

from melissa_trainer.buffers import BufferStats
from melissa_trainer.stream.read_clock import READ_HISTORY, ReadClock
from melissa_trainer.stream.starvation_watch import StarvationWatch
from melissa_trainer.study.progress import REFRESH, ProgressFile, read_progress
from melissa_trainer.study.starvation import AWAY_FACTOR, DEADLOCK_GRACE, DeadlockCheck

STEP = 30.0  # seconds of one of rank 0's steps: more than the fixed grace


def said_at(check: DeadlockCheck, rank0: Any, until: float) -> float | None:
    """Feed `check` rank 0's writes, every `REFRESH` s from 0 to `until` (rank 0's
    progress at t: `rank0(t)`); the first t at which the deadlock is said, or None."""
    t = 0.0
    while t <= until:
        if check(rank0(t)) is not None:
            return t
        t += REFRESH
    return None


def test_a_rank_0_making_slow_steps_is_not_called_deadlocked() -> None:
    """One step a window, 30 s each: a read every 30 s. Before, the deadlock was said
    at 20 s (its counts the same in two writes 20 s apart), of a healthy run."""

    def rank0(t: float) -> dict[str, Any]:
        return stuck(t, reads=10 + int(t // STEP), away_for=t % STEP, away_max=STEP)

    check = DeadlockCheck(1)
    assert said_at(check, rank0, 20.0) is None
    assert said_at(check, rank0, 40.0) is None
    assert said_at(check, rank0, 600.0) is None


def test_a_rank_0_inside_a_window_of_slow_steps_is_not_called_deadlocked() -> None:
    """A window of 4 steps of 30 s: rank 0 reads its next window's batches, then makes
    no read for 120 s (as before, every window). Not a deadlock at 20, 40, 60 s, nor
    until twice that (before: said at 20 s)."""

    def rank0(t: float) -> dict[str, Any]:
        return stuck(t, reads=40, away_for=t, away_max=4 * STEP)

    for until in (20.0, 40.0, 60.0, AWAY_FACTOR * 4 * STEP - REFRESH):
        assert said_at(DeadlockCheck(1), rank0, until) is None, until
    assert said_at(DeadlockCheck(1), rank0, 600.0) == AWAY_FACTOR * 4 * STEP


def test_a_rank_0_whose_reads_stop_is_called_deadlocked_within_the_bound() -> None:
    """Slow steps (30 s between reads), then none: rank 0 blocked in the agreement with
    its batches in hand. Said once it has stayed away from its buffer max(grace,
    AWAY_FACTOR x 30 s) = 60 s, no later than a write after that."""

    def rank0(t: float) -> dict[str, Any]:
        return stuck(t, reads=40, away_for=t, away_max=STEP)

    bound = max(DEADLOCK_GRACE, AWAY_FACTOR * STEP)
    assert bound == 60.0
    when = said_at(DeadlockCheck(1), rank0, 600.0)
    assert when is not None and bound <= when < bound + REFRESH


def test_a_rank_0_whose_reads_stopped_earlier_is_said_after_the_fixed_grace() -> None:
    """Rank 0 stopped reading long before this rank looked: the two writes a grace
    apart still bound it from below (the state must hold), nothing more."""

    def rank0(t: float) -> dict[str, Any]:
        return stuck(t, reads=40, away_for=500.0 + t, away_max=STEP)

    assert said_at(DeadlockCheck(1), rank0, 600.0) == DEADLOCK_GRACE


def test_fast_steps_keep_the_fixed_grace() -> None:
    def rank0(t: float) -> dict[str, Any]:
        return stuck(t, reads=3, away_for=t + 0.5, away_max=0.05)

    assert said_at(DeadlockCheck(1), rank0, 600.0) == DEADLOCK_GRACE


def test_a_rank_0_waiting_for_its_own_data_is_not_called_deadlocked() -> None:
    """Its training thread comes to its source at every wait (`away_for` stays near 0)
    though no read completes: it is not blocked waiting for this rank."""

    def rank0(t: float) -> dict[str, Any]:
        return stuck(t, reads=7, away_for=0.02, away_max=1.0)

    assert said_at(DeadlockCheck(1), rank0, 600.0) is None


def test_an_older_rank_0s_progress_keeps_the_fixed_grace() -> None:
    """No reads published (an older rank 0, or none made yet): as before."""
    assert said_at(DeadlockCheck(1), stuck, 600.0) == DEADLOCK_GRACE
    no_read_yet = lambda t: stuck(t, reads=0, away_for=None, away_max=None)  # noqa: E731
    assert said_at(DeadlockCheck(1), no_read_yet, 600.0) == DEADLOCK_GRACE


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_read_clock_measures_the_time_away_between_reads_not_the_waits() -> None:
    clock = Clock()
    reads = ReadClock(clock)
    assert reads.published(clock.now) == {"reads": 0, "away_for": None, "away_max": None}
    reads.came(read=True)  # the window's batches: a read...
    clock.now += 3.0
    reads.came(read=False)  # ...that waited 3 s for data (not time away)
    clock.now += 0.5
    reads.came(read=True)
    clock.now += STEP  # the window's steps
    reads.came(read=True)
    clock.now += 7.0
    assert reads.published(clock.now) == {"reads": 3, "away_for": 7.0, "away_max": STEP}


def test_the_read_clock_forgets_the_gaps_older_than_its_history() -> None:
    clock = Clock()
    reads = ReadClock(clock)
    reads.came(read=True)
    clock.now += 100.0  # a long gap, then READ_HISTORY short ones: it is forgotten
    for _ in range(READ_HISTORY + 1):
        reads.came(read=True)
        clock.now += 1.0
    assert reads.published(clock.now)["away_max"] == 1.0


def test_the_watch_counts_the_reads_of_its_training_thread() -> None:
    clock = Clock()
    w = StarvationWatch(
        0, 2, 600.0, lambda idle: None, lambda: "", lambda: 0,
        lambda: BufferStats(size=0, capacity=8, put=0, got=0, evicted=0), clock,
    )  # fmt: skip
    w.check(4, 0.0)  # a read
    clock.now += 2.0
    w.check(4, 0.02)  # it waits
    clock.now += STEP
    w.check(4, 0.0)
    assert w.reads.published(clock.now) == {"reads": 2, "away_for": 0.0, "away_max": STEP}


class Held:
    """Rank 0's launcher while its receiver is held (the deadlock's state)."""

    def data_backpressured(self) -> bool:
        return True

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return True, 4

    def summary(self) -> dict[str, float]:
        return {"running": 0, "pending": 11, "exited": 5, "finished": 0}

    def silence_explained(self) -> str | None:
        return None

    def jobs_alive(self) -> int:
        return 0


def test_rank_0_publishes_its_reads_at_each_write_without_writing_for_them(
    tmp_path: Path,
) -> None:
    clock = Clock()
    reads = ReadClock(clock)
    progress = ProgressFile(tmp_path, "r")
    launcher: Any = Held()
    assert progress.update(launcher, now=clock.now)
    said = read_progress(tmp_path, "r")
    assert said is not None and "reads" not in said  # (not set yet: an older file's)
    progress.reads = reads
    reads.came(read=True)
    clock.now += 1.0
    assert not progress.update(launcher, now=clock.now)  # a read alone writes nothing
    clock.now += REFRESH
    assert progress.update(launcher, now=clock.now)  # (rank 0 held: its refresh)
    said = read_progress(tmp_path, "r")
    assert said is not None
    assert (said["reads"], said["away_for"], said["away_max"]) == (1, 1.0 + REFRESH, None)
