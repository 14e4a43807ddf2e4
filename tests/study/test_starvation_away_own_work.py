"""Rank 0's time away from its buffer between two reads (`ReadClock.came`, published
as ``away_max``) leaves out the work of its own between them (`ReadClock.work_began` /
`work_ended`: a hook call, an action point), which the deadlock check excuses on its
own (``own_work_for``, ``own_work_ago``: `study.starvation`). Before, a 60 s save
between two reads made ``away_max`` 60 s, so the deadlock was said only after rank 0
had stayed away 120 s; a 5-minute evaluation among the last `READ_HISTORY` reads made
it 10 minutes, the default stall_timeout's: the check added nothing to it.

Every clock here is a number the test sets."""

from __future__ import annotations

from typing import Any

import pytest
from test_deadlock_grace import Clock, said_at
from test_starved_deadlock import stuck  # (rank 0's progress in the deadlock's state)

from melissa_trainer.stream.read_clock import ReadClock
from melissa_trainer.study.progress import REFRESH
from melissa_trainer.study.starvation import DEADLOCK_GRACE, DeadlockCheck

STEP = 0.5  # seconds of rank 0's fast steps between two reads


def fast_reads(reads: ReadClock, clock: Clock, n: int) -> None:
    """`n` reads, `STEP` s of steps after each."""
    for _ in range(n):
        reads.came(read=True)
        clock.now += STEP


def own_work(reads: ReadClock, clock: Clock, seconds: float) -> None:
    """An action point of `seconds` (a save, an evaluation), a hook fired inside it
    (nested work: one span)."""
    outer = reads.work_began()
    clock.now += seconds / 2
    inner = reads.work_began()
    clock.now += seconds / 4
    reads.work_ended(inner)
    clock.now += seconds / 4
    reads.work_ended(outer)


@pytest.mark.parametrize("seconds", [60.0, 300.0])
def test_own_work_between_two_reads_does_not_raise_the_longest_time_away(
    seconds: float,
) -> None:
    clock = Clock()
    reads = ReadClock(clock)
    fast_reads(reads, clock, 5)
    own_work(reads, clock, seconds)  # (between a read's steps and the next read)
    fast_reads(reads, clock, 5)
    assert reads.published(clock.now)["away_max"] == STEP


def test_a_long_gap_without_own_work_still_raises_it() -> None:
    clock = Clock()
    reads = ReadClock(clock)
    fast_reads(reads, clock, 5)
    clock.now += 60.0  # (slow steps: no own work)
    fast_reads(reads, clock, 5)
    assert reads.published(clock.now)["away_max"] == 60.0 + STEP


def test_the_steps_around_own_work_count_the_work_not() -> None:
    clock = Clock()
    reads = ReadClock(clock)
    fast_reads(reads, clock, 5)
    clock.now += 60.0
    fast_reads(reads, clock, 1)
    # steps of 30 s and a 300 s hook between two reads: the steps count, the hook not
    clock.now += 30.0
    own_work(reads, clock, 300.0)
    fast_reads(reads, clock, 1)
    assert reads.published(clock.now)["away_max"] == 60.0 + STEP
    clock.now += 70.0
    own_work(reads, clock, 300.0)
    fast_reads(reads, clock, 1)
    assert reads.published(clock.now)["away_max"] == 70.0 + STEP


def test_only_the_own_work_after_the_last_read_is_left_out() -> None:
    """Work begun before a read and ended after it (a read inside it): the part before
    the read was in the gap before it, not in the next."""
    clock = Clock()
    reads = ReadClock(clock)
    reads.came(read=True)
    clock.now += 10.0
    outer = reads.work_began()
    clock.now += 100.0
    reads.came(read=True)  # away 10 s: the 100 s inside the work left out
    clock.now += 40.0
    reads.work_ended(outer)
    clock.now += 20.0
    reads.came(read=True)  # away 20 s: the 40 s of the work since the read left out
    assert reads.published(clock.now)["away_max"] == 20.0


@pytest.mark.parametrize("seconds", [60.0, 300.0])
def test_the_deadlock_after_a_long_own_work_is_said_by_the_fixed_grace(seconds: float) -> None:
    """Fast steps with a save (60 s) or an evaluation (300 s) among its recent reads,
    then rank 0 blocks in the step agreement (out of any work of its own, reading
    nothing) at 0, its state the deadlock's: said at the grace, as the bound of
    `study.starvation` says for steps of milliseconds (t_r + 26 s with this rank's
    reads of the file), not at 2 x the work's seconds (before: 120 s, 600 s)."""
    clock = Clock()
    reads = ReadClock(clock)
    fast_reads(reads, clock, 20)
    own_work(reads, clock, seconds)
    fast_reads(reads, clock, 20)
    reads.came(read=True)  # its last read: then it blocks
    blocked = clock.now

    def rank0(t: float) -> dict[str, Any]:
        mine = blocked + t
        return stuck(t, **reads.published(mine), **reads.own_work(mine))

    when = said_at(DeadlockCheck(1), rank0, 2 * seconds + 2 * REFRESH)
    assert when == DEADLOCK_GRACE
