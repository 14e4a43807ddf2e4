"""A rank 0 in work of its own is excused only while it is behind the starved rank
(`study.starvation.ahead`): one that has begun as many reads of its buffer as the
starved rank (the read that rank waits in counted) holds its batches of the window that
rank waits for, and reads nothing before the ranks agree on that window, which needs the
starved rank's batch. Its own work then ends nothing: a user's collective in a hook that
waits for the starved rank (an all-reduce in ``on_step_start`` whose result it reads, on
CUDA, where the agreement's start does not block the host), or a slow hook.

Before, any own work excused rank 0: such a deadlock was left to ``stall_timeout``
(600 s by default). Every clock here is a number the test sets; rank 0's writes come
every `REFRESH` s (`test_deadlock_grace.said_at`). The gloo run of the hook's
collective: tests/trainer/test_starved_hook_collective.py."""

from __future__ import annotations

from typing import Any

from test_deadlock_grace import Clock, said_at, stuck

from melissa_trainer.stream.read_clock import ReadClock
from melissa_trainer.study.starvation import (
    AWAY_FACTOR,
    DEADLOCK_GRACE,
    DeadlockCheck,
    ahead,
)

#: rank 0's reads: two windows of 2 batches, then the 2 of the window taken ahead
READS = 6
AWAY_MAX = 1.0  # its longest time away between two reads before (fast steps)
UNTIL = 600.0  # seconds of writes fed (the default stall_timeout)


def in_a_hook_after_reading(reads: int) -> Any:
    """Rank 0's progress at t: it began its `reads`-th read at 0 (its last), entered a
    hook at 0.5 and never leaves it (a collective that waits for the starved rank); its
    previous own work ended 3 s before its read."""

    def rank0(t: float) -> dict[str, Any]:
        return stuck(
            t, reads=reads, away_for=t, away_max=AWAY_MAX,
            own_work_for=max(0.0, t - 0.5), own_work_ago=t + 3.0,
        )  # fmt: skip

    return rank0


def deadlock_at(mine: int | None, reads: int = READS) -> float | None:
    """When the starved rank, waiting in its read `mine`, says the deadlock."""
    check = DeadlockCheck(1)
    return said_at(lambda p: check(p, mine), in_a_hook_after_reading(reads), UNTIL)


def test_a_rank_0_ahead_in_a_hook_is_called_deadlocked_after_the_grace() -> None:
    """Rank 1 waits in read 5 (window 3's first batch), rank 0 has read window 3's two
    batches and waits in its hook's collective: said by the grace (before: never, the
    wait left to stall_timeout)."""
    bound = max(DEADLOCK_GRACE, AWAY_FACTOR * AWAY_MAX)
    assert deadlock_at(mine=READS - 1) == bound
    assert deadlock_at(mine=READS) == bound  # (its last read: the same window)
    check, rank0 = DeadlockCheck(1), in_a_hook_after_reading(READS)
    assert check(rank0(0.0), READS) is None
    words = check(rank0(bound), READS)
    assert words is not None and "waits for rank 1 in a hook or an action" in words


def test_a_rank_0_behind_in_a_hook_is_still_excused() -> None:
    """Fewer reads than the starved rank's: it reads once out of its hook (a slow hook
    on rank 0 alone before its window's reads, tests/trainer/test_starved_slow_hook.py)."""
    assert deadlock_at(mine=READS + 1) is None
    assert deadlock_at(mine=1, reads=0) is None  # (a slow on_train_start: no read yet)


def test_a_count_not_known_excuses_own_work_as_before() -> None:
    assert deadlock_at(mine=None) is None
    assert not ahead({"reads": None}, 3)  # (an older rank 0's file: no reads)
    assert not ahead({}, 3)
    assert not ahead({"reads": True}, 1)  # (a bool is no count)
    assert not ahead({"reads": 0}, 0)  # (no read of this rank's yet: nothing to be ahead of)
    assert ahead({"reads": 3}, 3) and ahead({"reads": 4}, 3) and not ahead({"reads": 2}, 3)


def test_the_read_clock_counts_the_reads_begun() -> None:
    """What the starved rank compares with rank 0's ``reads`` (`ReadClock.count`)."""
    clock = Clock()
    reads = ReadClock(clock)
    assert reads.count == 0
    reads.came(read=True)
    reads.came(read=False)  # (a wait in the same read: no new one)
    reads.came(read=True)
    assert reads.count == 2 == reads.published(clock.now)["reads"]
