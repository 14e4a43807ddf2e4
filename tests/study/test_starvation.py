"""A rank that waits for a batch no sample comes for fails, saying why
(`melissa_trainer.study.starvation`), and rank 0's progress file that tells the other
ranks whether the launcher explains the silence (`melissa_trainer.study.progress`).

The watch takes its clock, so the timeout is tested without waiting; the e2e test of
the hang it ends is tests/trainer/test_starved_rank.py."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.buffers import BufferStats
from melissa_trainer.stream.starvation_watch import StarvationWatch, StarvedRankError, starved_words
from melissa_trainer.study.progress import PROGRESS_FILE, ProgressFile, read_progress
from melissa_trainer.study.progress_words import rank0_words


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watch(
    clock: Clock,
    put: list[int],
    excuse: str | None = None,
    timeout: float | None = 10.0,
    stream_has_it: list[bool] | None = None,
) -> StarvationWatch:
    has = [False] if stream_has_it is None else stream_has_it
    return StarvationWatch(
        1, 2, timeout, lambda idle: excuse, lambda: "Rank 0's state. ", lambda: put[0],
        lambda: BufferStats(size=1, capacity=8, put=put[0], got=0, evicted=0), clock,
        stream_has_it=lambda: has[0],
    )  # fmt: skip


def test_a_wait_with_no_sample_past_the_timeout_fails_naming_the_rank_and_its_buffer() -> None:
    clock, put = Clock(), [1]
    w = watch(clock, put)
    w.check(4, 0.02)  # the wait starts
    clock.now += 10.0
    w.check(4, 0.02)  # at the timeout: not past it
    clock.now += 0.5
    with pytest.raises(StarvedRankError) as info:
        w.check(4, 0.02)
    said = str(info.value)
    assert said.startswith("rank 1 of 2 cannot train: it waits for a batch of 4 samples")
    assert "no sample has reached its buffer for 10 s (stall_timeout=10)" in said
    assert "its buffer holds 1 sample, 1 received in all. Rank 0's state. " in said
    assert "Fix: a smaller batch_size" in said and "buffer='fifo'" in said


def test_a_sample_or_a_read_restarts_the_clock() -> None:
    clock, put = Clock(), [0]
    w = watch(clock, put)
    w.check(4, 0.02)
    clock.now += 9.0
    put[0] = 1  # a sample came: the clock restarts
    w.check(4, 0.02)
    clock.now += 9.0
    w.check(4, 0.02)
    w.check(4, 0.0)  # a read: the wait is over (training went on meanwhile)
    clock.now += 60.0
    w.check(4, 0.02)  # a new wait: from now
    clock.now += 9.0
    w.check(4, 0.02)


def test_an_explained_wait_is_said_once_and_waited_for(caplog: pytest.LogCaptureFixture) -> None:
    clock, put = Clock(), [0]
    w = watch(clock, put, excuse="jobs starting up")
    w.check(4, 0.02)
    with caplog.at_level(logging.WARNING, "melissa_trainer.study.starvation"):
        for _ in range(3):
            clock.now += 11.0
            w.check(4, 0.02)
    (said,) = [r.getMessage() for r in caplog.records]
    assert "rank 1 has waited 11 s for a batch of 4 samples" in said
    assert "not a stall: jobs starting up" in said


def test_a_silence_the_receivers_watchdog_has_is_left_to_it() -> None:
    """Its clock runs unexcused: it fails within stall_timeout of the last message,
    naming the simulations it waits for (the message the existing tests expect)."""
    clock, put, has = Clock(), [0], [True]
    w = watch(clock, put, stream_has_it=has)
    w.check(4, 0.02)
    clock.now += 30.0
    w.check(4, 0.02)  # left to the receiver's watchdog
    has[0] = False  # excused there (a rank but 0: the start-up allowance), not here
    with pytest.raises(StarvedRankError, match="cannot train: it waits for a batch of 4 samples"):
        w.check(4, 0.02)


def test_no_timeout_never_fails() -> None:
    clock, put = Clock(), [0]
    w = watch(clock, put, timeout=None)
    w.check(4, 0.02)
    clock.now += 1e6
    w.check(4, 0.02)


def test_a_held_back_batch_is_said_so() -> None:
    words = starved_words(1, 2, 61.0, 60.0, 4, 6, 6, "")
    assert "its buffer holds 6 samples, 6 received in all; it holds a batch's worth" in words


class FakeLauncher:
    def __init__(self) -> None:
        self.held, self.explained, self.pending = False, "starting up", 14

    def data_backpressured(self) -> bool:
        return self.held

    def silence_explained(self, idle: float = 0.0) -> str | None:
        return self.explained

    def jobs_alive(self) -> int:
        return 2

    def summary(self) -> dict[str, float]:
        return {"running": 2.0, "pending": float(self.pending), "finished": 0.0}

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return False, 2


def test_rank_0_writes_its_progress_on_change_and_another_rank_reads_it(tmp_path: Path) -> None:
    launcher: Any = FakeLauncher()
    progress = ProgressFile(tmp_path, "run1")
    assert read_progress(tmp_path, "run1") is None  # not known yet
    assert progress.update(launcher, now=0.0)
    assert read_progress(tmp_path, "run1")["explained"] == "starting up"  # type: ignore[index]
    assert read_progress(tmp_path, "run2") is None  # another run's file
    assert not progress.update(launcher, now=1.0)  # nothing changed: not written again
    launcher.held, launcher.explained = True, None
    assert progress.update(launcher, now=2.0)
    assert not progress.update(launcher, now=3.0)
    assert progress.update(launcher, now=7.5)  # refreshed while held: its duration
    said = read_progress(tmp_path, "run1")
    assert said is not None and said["explained"] is None and said["backpressured_for"] == 5.5
    words = rank0_words(said, 1)
    assert "Rank 0's receiver has waited for room in its buffer for 6 s" in words  # (5.5)
    assert "it waits for rank 1, in the step agreement" in words
    assert "2 jobs alive, 14 simulations pending, 0 finished" in words
    (tmp_path / PROGRESS_FILE).write_text("{not json")
    assert read_progress(tmp_path, "run1") is None
    assert rank0_words(None, 1) == "Rank 0's state is not known here. "
    assert json.loads(json.dumps(said))  # (plain JSON)
