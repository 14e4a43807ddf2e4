"""The wall-clock checkpoint cadence (`FlowHook`'s `save_seconds`, `TimedSave`), with a
fake clock: rank 0's clock decides, the request travels with the stop flag
(`StopSync.request_save`), every rank takes it at the first step end after the
agreement is read, and a save that another cause already wrote is not repeated.

The loop is driven by hand as `OnlineTrainer.train` runs it with one process: at each
window, the agreement is started and read, then the window's steps end (STEP_END, then
a save when one is asked for, which fires SAVE). No trainer, no thread, no sleep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.core.stop_sync import StopSync
from melissa_trainer.hooks.flow import FlowHook, TimedSave

CPU = torch.device("cpu")


@dataclass
class FakeClock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeTrainer:
    """What `FlowHook` reads of a trainer (`TrainerView`'s)."""

    is_main_process: bool = True
    stop_sync: StopSync = field(default_factory=lambda: StopSync(CPU, 1))
    preempted_by: None = None


class Run:
    """A `FlowHook` in a one-process loop of windows of `every` steps; `saves` lists the
    steps saved at. Each step advances the clock by `step_seconds`."""

    def __init__(self, hook: FlowHook, clock: FakeClock, every: int = 4, main: bool = True):
        self.hook, self.clock, self.every = hook, clock, every
        self.trainer = FakeTrainer(is_main_process=main)
        self.state, self.control = TrainerState(), TrainerControl()
        self.saves: list[int] = []
        hook.on_train_start(self.trainer, self.state, self.control)  # type: ignore[arg-type]

    def save(self) -> None:
        self.control.should_save = False
        self.state.last_save_step = self.state.global_step
        self.saves.append(self.state.global_step)
        self.hook.on_save(self.trainer, self.state, self.control, "path")  # type: ignore[arg-type]

    def windows(self, n: int, step_seconds: float = 1.0) -> None:
        sync = self.trainer.stop_sync
        for _ in range(n):
            sync.start(False, self.every)
            sync.result()
            for _ in range(self.every):
                self.clock.now += step_seconds
                self.state.global_step += 1
                self.hook.on_step_end(self.trainer, self.state, self.control)  # type: ignore[arg-type]
                if self.control.should_save:
                    self.save()

    def end(self) -> None:
        self.hook.on_loop_end(self.trainer, self.state, self.control)  # type: ignore[arg-type]
        if self.control.should_save:
            self.save()


def test_a_save_every_save_seconds_at_the_first_window_after_the_clock_says_so() -> None:
    clock = FakeClock()
    run = Run(FlowHook(logging_steps=100, save_seconds=10, clock=clock), clock)
    run.windows(8)  # 32 steps of 1 s
    # due at step 10 (asked there), agreed at the next window (steps 13..16): saved at
    # 13; the clock restarts there: due at 23, saved at 25; due at 35: not reached
    assert run.saves == [13, 25]


def test_no_timed_save_in_a_run_shorter_than_save_seconds_and_none_without_it() -> None:
    clock = FakeClock()
    run = Run(FlowHook(logging_steps=100, save_seconds=600, clock=clock), clock)
    run.windows(10, step_seconds=5.0)  # 200 s
    assert run.saves == []
    clock = FakeClock()
    run = Run(FlowHook(logging_steps=100, save_seconds=None, clock=clock), clock)
    run.windows(10, step_seconds=100.0)
    assert run.saves == []


def test_only_rank_0_asks_and_every_rank_saves_on_the_agreed_request() -> None:
    clock = FakeClock()
    other = Run(FlowHook(logging_steps=100, save_seconds=10, clock=clock), clock, main=False)
    other.windows(8)  # its own clock is past due: it never asks
    assert other.saves == []
    other.trainer.stop_sync.request_save(33)  # rank 0's request, as the MAX brings it
    other.windows(1)
    assert other.saves == [33]  # taken at the first step end after the agreement


def test_a_step_save_covers_a_timed_request_and_restarts_the_clock() -> None:
    clock = FakeClock()
    run = Run(FlowHook(logging_steps=100, save_steps=12, save_seconds=10, clock=clock), clock)
    run.windows(8)
    # timed request at step 10; save_steps saves at 12 (after it was asked): the
    # request agreed at step 13 is dropped; the clock restarted at 12: due (asked) at
    # 22; save_steps saves at 24: the request agreed at 25 is dropped too
    assert run.saves == [12, 24]
    run.windows(2)  # restarted at 24: asked at 34; save_steps' 36 covers it (not 37)
    assert run.saves == [12, 24, 36]


def test_a_request_agreed_when_the_loop_ends_is_saved_at_the_end() -> None:
    clock = FakeClock()
    hook = FlowHook(logging_steps=100, save_seconds=10, save_at_end=False, clock=clock)
    run = Run(hook, clock)
    run.windows(2, step_seconds=6.0)  # due at step 2 (12 s), saved at 5; due at 7 (42 s)
    assert run.saves == [5]
    sync = run.trainer.stop_sync
    sync.start(True, 4)  # the agreement that stops the loop carries the request
    sync.result()
    run.end()
    assert run.saves == [5, 8]


def test_a_failed_timed_save_is_tried_again_save_seconds_later() -> None:
    clock = FakeClock()
    run = FailingSaves(FlowHook(logging_steps=100, save_seconds=10, clock=clock), clock)
    run.windows(8)  # no SAVE fires: the agreed request restarted the clock
    assert run.failed == [13, 25]


class FailingSaves(Run):
    """Every save fails (``on_save_error="continue"``): no SAVE, no `last_save_step`."""

    failed: list[int]

    def save(self) -> None:
        self.control.should_save = False
        self.failed = [*getattr(self, "failed", []), self.state.global_step]


@pytest.mark.parametrize("seconds", [0, -1.0, float("inf"), float("nan"), "10"])
def test_timed_save_refuses_a_bad_period(seconds: object) -> None:
    with pytest.raises(ValueError, match="save_seconds must be a finite number > 0"):
        TimedSave(seconds, FakeClock())  # type: ignore[arg-type]


def test_stop_sync_carries_the_largest_request_once() -> None:
    sync = StopSync(CPU, 1)
    assert sync.take_save_request() is None
    sync.request_save(0)  # step 0 is a request too (sent as step + 1)
    sync.request_save(3)
    sync.agree(False, 1)
    assert sync.take_save_request() == 3
    assert sync.take_save_request() is None  # taken once
    sync.agree(False, 1)
    assert sync.take_save_request() is None  # sent once
