"""The clocks of `surrogate_cost.py`'s studies (issue 46): `StepClock`, a hook timing the
span from the first step to the last (wall, the process's CPU, the training thread's CPU,
the sampler's CPU in that span; a reference workload run between steps, its CPU taken
out: `step_reference`); `SamplerClock`, the sampler's CPU on whichever thread it works;
`force_draws`, an on arm's sampler working as ever while its study runs given draws.
"""

from __future__ import annotations

import os
import time
from typing import Any

import step_reference

from melissa_trainer import Hook

#: the studies' trace: one line every this many steps
TRACE_EVERY = 25


class StepClock(Hook):
    """Seconds from the first step's start to the last step's end (wall, the process's
    CPU, the training thread's CPU: hooks run on it), the sampler's CPU-seconds in that
    span (`SamplerClock`'s count read at both ends: its draws before the first step, made
    while no step runs, and its observations at the launcher's stop, after the last,
    are not the steps' cost), and the steps."""

    def __init__(self, sampler: SamplerClock) -> None:
        self.sampler = sampler
        self.first: float | None = None
        self.last = self.first_cpu = self.last_cpu = self.first_thread = self.last_thread = 0.0
        self.first_sampler = self.last_sampler = 0.0
        self.steps = 0
        self.trace: list[list[float]] | None = None
        self.launcher: Any = None
        self.stream_end: list[float] | None = None  # steps, thread CPU, sampler CPU
        self.pin: int | None = None  # the core the training thread moves to
        # run after the steps whose number % `every` is `offset` (`step_reference.plan`)
        self.reference: step_reference.Reference | None = None
        self.every = self.offset = 0

    def _process(self) -> float:
        """The process's CPU-seconds, less those of the reference's steps."""
        return time.process_time() - (self.reference.seconds if self.reference else 0.0)

    def _thread(self) -> float:
        """The training thread's CPU-seconds, less those of the reference's steps."""
        return time.thread_time() - (self.reference.seconds if self.reference else 0.0)

    def on_end_of_stream(self, trainer: Any, state: Any, control: Any) -> None:
        if self.first is not None and self.stream_end is None:
            self.stream_end = [self.steps, self._thread() - self.first_thread,
                               self.sampler.seconds - self.first_sampler,
                               time.perf_counter() - self.first]  # fmt: skip

    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        if self.first is None:
            if self.pin is not None:  # this thread alone; what it started stays put
                os.sched_setaffinity(0, {self.pin})
            self.first, self.first_cpu = time.perf_counter(), self._process()
            self.first_thread, self.first_sampler = self._thread(), self.sampler.seconds

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.last, self.last_cpu = time.perf_counter(), self._process()
        self.last_thread, self.last_sampler = self._thread(), self.sampler.seconds
        self.steps += 1
        if self.trace is not None and self.steps % TRACE_EVERY == 0:
            finished = self.launcher.summary()["finished"] if self.launcher else -1
            self.trace.append([self.steps, self.last - (self.first or 0.0),
                               self.last_thread - self.first_thread,
                               self.last_sampler - self.first_sampler,
                               self.last_cpu - self.first_cpu, len(trainer.buffer),
                               finished])  # fmt: skip
        if self.reference is not None and self.steps % self.every == self.offset:
            self.reference.run()


class SamplerClock:
    """The CPU-seconds of the sampler's draws and observations, on whichever thread
    makes them (the launcher's, the training thread's): its `draw` and `observe`
    wrapped (`time.thread_time` around each call; `seconds` is updated when a call
    ends, under the launcher's lock, and read by the training thread: a float, whole)."""

    def __init__(self, sampler: Any) -> None:
        self.seconds = 0.0
        for name in ("draw", "observe"):
            method = getattr(sampler, name, None)
            if method is not None:
                setattr(sampler, name, self._timed(method))

    def _timed(self, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start

        return timed


def force_draws(sampler: Any, draws: list[dict[str, float]]) -> None:
    """`sampler` draws as ever (its work, its state), but each of its draws is replaced
    by the next of `draws`: the study launches those, and the sampler observes their
    losses (an on arm running the very simulations of an off arm run before it)."""
    replay = iter(draws)
    original = sampler.draw

    def draw() -> dict[str, float]:
        original()
        return dict(next(replay))

    sampler.draw = draw
