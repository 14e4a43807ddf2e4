"""`StepServing`: what a `ServingHook` (`serving`) serves at each training step's end,
under its two bounds. Cost: each step earns the budget (`serving_budget.ServingBudget`)
its seconds between step ends less serving, and a batch starts only with credit left.
Latency: a batch whose oldest request has waited `max_latency_steps` model versions is
served whatever the budget (charged to it). Not thread-safe: the training thread (the
idle thread reads `last_end` only).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

from melissa_trainer.hooks.serving_budget import ServingBudget
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_queue import Pending

__all__ = ["StepServing"]


class StepServing:
    """The serving between training steps of one `ServingHook` (module docstring).

    Attributes:
        last_end: when the last step's serving ended (perf_counter seconds; None: not
            training yet), what `serving_idle.IdleServing` measures idleness from.
    """

    def __init__(
        self, budget: ServingBudget, max_batch: int, max_latency_steps: int | None
    ) -> None:
        self.budget = budget
        self.max_batch = max_batch
        self.max_latency_steps = max_latency_steps
        self.last_end: float | None = None  # (perf_counter seconds)
        self._served = 0.0  # seconds serving since `last_end`
        self._step_started: float | None = None  # (perf_counter: this step's STEP_START)

    def train_start(self) -> None:
        """Training starts (again): its time counts from now."""
        self.last_end, self._served = time.perf_counter(), 0.0

    def step_start(self, model: threading.RLock) -> None:
        """At STEP_START: take the `model` (an idle batch that runs ends first) and charge
        the wait to the budget."""
        started = time.perf_counter()
        model.acquire()
        self._step_started = time.perf_counter()
        self.budget.spend(self._step_started - started)  # an idle batch ran over

    def step_end(
        self, server: PredictServer, version: int, serve: Callable[[list[Pending], int], None]
    ) -> None:
        """At STEP_END (the model at `version`): the budget earns the step, then `serve`
        runs `server`'s batches while the budget allows or the oldest request is due."""
        now = time.perf_counter()
        budget = self.budget
        if self.last_end is not None:
            budget.earn(now - self.last_end - self._served)
        if self._step_started is not None:
            budget.record_step(now - self._step_started)  # (idleness: `idle_after`)
            self._step_started = None
        self._served = 0.0
        while server.pending() and (budget.allows() or self.due(server, version)):
            started = time.perf_counter()
            serve(server.take(self.max_batch), version)
            spent = time.perf_counter() - started
            budget.spend(spent)
            self._served += spent
        self.last_end = time.perf_counter()

    def due(self, server: PredictServer, version: int) -> bool:
        """Whether the oldest waiting request must be served now (the latency bound)."""
        bound = self.max_latency_steps
        if bound is None:
            return False
        oldest = server.oldest_version()
        return oldest is not None and version - oldest >= bound

    def typical_step(self) -> float | None:
        """The median of the recent training steps' seconds (None: none yet)."""
        steps = list(self.budget.step_durations)  # (a copy: the training thread appends)
        return statistics.median(steps) if steps else None
