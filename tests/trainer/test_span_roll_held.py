"""A rank held in its step's collectives (DDP's backward all-reduce on gloo, which no
wait watches) reads rank 0's refusal mark too: the watch tells its roll call `held` at
each look that finds the span of steps armed and its step count where the look before
saw it (`core.wait_watch.WaitWatch._watch`), as it does during a watched wait.

Before, `held` was told during a watched wait only: a rank busy in a step whose peer
(rank 0, refusing alone) never joined its all-reduce never read the mark, and rank 0
waited out `refusal_mark.READ_WAIT` (15 s) for a read that never came (the real two-rank
run: tests/trainer/test_refusal_alone_read.py, rank 0 refusing mid-training). A span
whose steps move asks nothing of the store (a request per look would be paid by every
step longer than a look otherwise). The steps are a counter the test moves; the looks
are counted, never timed."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: wait_said
from wait_said import WAIT  # noqa: E402

from melissa_trainer.core.wait_watch import WaitWatch  # noqa: E402


class Roll:
    """A roll call that counts `held` (an event at each) and knows no late rank."""

    world = 2

    def __init__(self) -> None:
        self.helds = 0
        self.told = threading.Event()

    def arrived(self, wait: int) -> None:
        pass

    def late(self, wait: int) -> list[int] | None:
        return None

    def held(self) -> None:
        self.helds += 1
        self.told.set()


def counted_looks(watch: WaitWatch, each: object = None) -> threading.Semaphore:
    """A semaphore released after each look of the watch's thread (its wrapped
    `_look_at_steps`); `each`, if callable, runs before each look (a step moved)."""
    seen = threading.Semaphore(0)
    look = watch._look_at_steps

    def counted(*a: object) -> object:
        if callable(each):
            each()
        try:
            return look(*a)  # type: ignore[arg-type]
        finally:
            seen.release()

    watch._look_at_steps = counted  # type: ignore[method-assign]
    return seen


@pytest.mark.timeout(60)
def test_a_span_whose_step_does_not_move_tells_held() -> None:
    roll = Roll()
    watch = WaitWatch(rank=1, first=0.04, roll=roll)  # (looks every 0.01 s)
    done = [3]
    with watch.stepping(lambda: done[0], after=5):  # (held even before a judged step)
        assert roll.told.wait(WAIT), "held was never told during a stuck step"


@pytest.mark.timeout(60)
def test_a_span_whose_steps_move_at_each_look_asks_nothing() -> None:
    roll = Roll()
    watch = WaitWatch(rank=1, first=0.04, roll=roll)
    done = [0]

    def step() -> None:
        done[0] += 1

    seen = counted_looks(watch, step)
    with watch.stepping(lambda: done[0], after=0):
        for _ in range(20):
            assert seen.acquire(timeout=WAIT)
    assert roll.helds == 0, roll.helds
