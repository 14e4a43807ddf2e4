"""A rank 0 in work of its own is not called deadlocked (`study.starvation`): a slow
hook on the main process alone (plotting, an upload in `on_log`), or the trainer's own
rank-0 part of an action (a save's rotation), holds rank 0 away from its buffer while
another rank starves, and its counts do not move, but it comes back by itself. Its
training thread marks such work (`ReadClock.work_began` / `work_ended`, around every
hook dispatch, `HookList.fire`, and every action point), and rank 0 publishes it
(``own_work_for``, ``own_work_ago``: `study.progress`).

Every clock here is a number the test sets: rank 0's writes are simulated every
`REFRESH` s, as `ProgressFile` rewrites its file while its receiver is held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_deadlock_grace import Clock, Held, said_at, stuck

from melissa_trainer.hooks import Event, Hook, HookList
from melissa_trainer.stream.read_clock import ReadClock
from melissa_trainer.study.progress import REFRESH, ProgressFile, read_progress
from melissa_trainer.study.progress_words import rank0_words
from melissa_trainer.study.starvation import AWAY_FACTOR, DEADLOCK_GRACE, DeadlockCheck

HOOK = 120.0  # seconds rank 0 spends in its slow hook
AWAY_MAX = 1.0  # its longest time away between two reads before (fast steps)


def in_a_slow_hook(entered: float, left: float | None) -> Any:
    """Rank 0's progress at t: fast steps until it read at 0, in its hook from
    `entered` to `left` (None: still in it), then away (blocked, or not yet back)."""

    def rank0(t: float) -> dict[str, Any]:
        inside = entered <= t and (left is None or t < left)
        own_for = t - entered if inside else None
        own_ago = t - left if left is not None and t >= left else None
        return stuck(
            t, reads=40, away_for=t, away_max=AWAY_MAX, own_work_for=own_for, own_work_ago=own_ago
        )

    return rank0


def test_a_rank_0_in_a_slow_hook_is_not_called_deadlocked() -> None:
    """In its hook for 120 s with the deadlock's state (before: said at 20 s)."""
    check = DeadlockCheck(1)
    assert said_at(check, in_a_slow_hook(0.5, None), HOOK) is None


def test_a_rank_0_that_leaves_its_hook_and_stays_away_is_called_deadlocked() -> None:
    """Out of its hook at 120 s, then no read (blocked in the agreement): said once it
    has been out of its own work and away for max(grace, AWAY_FACTOR x away_max)."""
    bound = max(DEADLOCK_GRACE, AWAY_FACTOR * AWAY_MAX)
    when = said_at(DeadlockCheck(1), in_a_slow_hook(0.5, HOOK), 600.0)
    assert when is not None and HOOK + bound <= when < HOOK + bound + REFRESH


def test_a_rank_0_that_leaves_its_hook_before_its_first_read_gets_the_grace() -> None:
    """A slow `on_train_start`: no read yet (before, a deadlock at once, the grace only
    from the two writes). Once out, the grace counts from its end: a write between its
    end and its first read (milliseconds later) says no deadlock."""

    def rank0(t: float) -> dict[str, Any]:
        left = t >= HOOK
        return stuck(
            t, reads=0, away_for=None, away_max=None,
            own_work_for=None if left else t, own_work_ago=t - HOOK if left else None,
        )  # fmt: skip

    check = DeadlockCheck(1)
    assert said_at(check, rank0, HOOK + DEADLOCK_GRACE - REFRESH) is None
    assert check(rank0(HOOK + DEADLOCK_GRACE)) is not None


def test_an_older_rank_0s_progress_without_own_work_is_read_as_before() -> None:
    def rank0(t: float) -> dict[str, Any]:
        return stuck(t, reads=40, away_for=t, away_max=AWAY_MAX)

    assert said_at(DeadlockCheck(1), rank0, 600.0) == DEADLOCK_GRACE


def test_the_read_clock_publishes_the_outermost_work_and_when_it_ended() -> None:
    clock = Clock()
    reads = ReadClock(clock)
    said = reads.own_work(clock.now)
    assert (said["own_work_for"], said["own_work_ago"]) == (None, None)
    outer = reads.work_began()
    clock.now += 3.0
    inner = reads.work_began()  # (a hook's event fired inside an action: nested)
    clock.now += 2.0
    reads.work_ended(inner)
    said = reads.own_work(clock.now + 1.0)
    assert (said["own_work_for"], said["own_work_ago"]) == (6.0, None)  # (still the outer)
    reads.work_ended(outer)
    clock.now += 4.0
    said = reads.own_work(clock.now)
    assert (said["own_work_for"], said["own_work_ago"]) == (None, 4.0)


class Marks(Hook):
    """Reads what rank 0 would publish from inside its own `on_step_end`, which takes
    7 s of the test's clock."""

    def __init__(self, reads: ReadClock, clock: Clock) -> None:
        self.reads, self.clock = reads, clock
        self.seen: tuple[Any, ...] = ()

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.clock.now += 7.0
        self.seen = (self.reads.own_work(self.clock.now)["own_work_for"],)


def test_a_hook_dispatch_is_marked_as_own_work() -> None:
    clock = Clock()
    reads = ReadClock(clock)
    marks = Marks(reads, clock)
    hooks = HookList([marks])
    hooks.work = reads
    hooks.fire(Event.STEP_END, None, None, None)
    assert marks.seen == (7.0,)
    said = reads.own_work(clock.now + 1.0)
    assert (said["own_work_for"], said["own_work_ago"]) == (None, 1.0)
    hooks.fire(Event.STEP_START, None, None, None)  # (nobody listens: nothing marked)
    assert reads.own_work(clock.now + 2.0)["own_work_ago"] == 2.0


def test_rank_0_publishes_its_own_work_at_each_write(tmp_path: Path) -> None:
    clock = Clock()
    reads = ReadClock(clock)
    progress = ProgressFile(tmp_path, "r")
    progress.reads = reads
    launcher: Any = Held()
    reads.work_began()
    clock.now += 3.0
    assert progress.update(launcher, now=clock.now)
    said = read_progress(tmp_path, "r")
    assert said is not None and (said["own_work_for"], said["own_work_ago"]) == (3.0, None)
    assert DeadlockCheck(1).stale(said) is False


def test_a_starved_ranks_message_says_rank_0_is_in_its_own_work() -> None:
    """A hook that waits in a collective for the starved rank is taken for own work:
    its deadlock is left to stall_timeout, whose message says where rank 0 is."""
    words = rank0_words(stuck(0.0, own_work_for=312.4), 1)
    assert "Rank 0's training has been in a hook or an action" in words
    assert "for 312 s" in words
    assert "hook" not in rank0_words(stuck(0.0, own_work_for=None, own_work_ago=3.0), 1)
