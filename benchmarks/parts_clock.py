"""`PartsClock`: the training thread's CPU per step split at the loop's events, per phase
of a study (while the simulations stream; after), for `study_parts.py` (issue 46).

The blocks (each a difference of `time.thread_time` between two events on the training
thread; the hook runs after the library's hooks, which the source installs first):

- **data**: STEP_START to BATCH_READY: the batch (the buffer's draw, the collation and
  `process_sample`);
- **backward**: BATCH_READY to AFTER_BACKWARD: forward, loss and backward (tracked: the
  per-sample losses kept as well);
- **update**: AFTER_BACKWARD to this hook's STEP_END: the optimizer's step, the hooks'
  STEP_END before this one (tracked: every `every` steps the tracker's reduction and the
  SIMULATION_LOSSES it fires);
- **between**: this hook's STEP_END to the next STEP_START: the requested actions and,
  while the simulations stream, the data path's work on the training thread.

A step's update is also kept apart by whether the step is a reduction step (its global
step a multiple of `every`), so that a reduction's own CPU shows as the difference of
their means. One gradient-accumulation micro-batch a step (as the studies measured).
Not thread-safe: the training thread only (as every hook).
"""

from __future__ import annotations

import time
from typing import Any

from melissa_trainer import Hook

__all__ = ["BLOCKS", "PHASES", "PartsClock"]

BLOCKS = ("data", "backward", "update", "between")
PHASES = ("stream", "after")


class PartsClock(Hook):
    """Splits the training thread's CPU per step (module docstring).

    Args:
        every: the steps between two reductions of the tracker (its
            ``simulation_loss_steps``).
    """

    def __init__(self, every: int) -> None:
        self.every = every
        self.phase = PHASES[0]
        #: per phase and block, CPU-seconds
        self.cpu = {phase: dict.fromkeys(BLOCKS, 0.0) for phase in PHASES}
        self.steps = dict.fromkeys(PHASES, 0)
        #: per phase, (CPU-seconds, count) of the updates of reduction steps and others
        self.updates = {phase: {"reduction": [0.0, 0], "other": [0.0, 0]} for phase in PHASES}
        self._mark: float | None = None  # the last event's thread time, within a step
        self._ended: float | None = None  # the last step's end

    def _lap(self, block: str) -> float:
        now = time.thread_time()
        spent = now - (self._mark if self._mark is not None else now)
        self.cpu[self.phase][block] += spent
        self._mark = now
        return spent

    def on_end_of_stream(self, trainer: Any, state: Any, control: Any) -> None:
        self.phase = PHASES[1]  # (fired again at each pseudo-epoch's end: stays "after")

    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        now = time.thread_time()
        if self._ended is not None:
            self.cpu[self.phase]["between"] += now - self._ended
        self._mark = now

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        self._lap("data")

    def on_after_backward(self, trainer: Any, state: Any, control: Any, loss: Any) -> None:
        self._lap("backward")

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        spent = self._lap("update")
        kind = "other" if state.global_step % self.every else "reduction"
        record = self.updates[self.phase][kind]
        record[0] += spent
        record[1] += 1
        self.steps[self.phase] += 1
        self._ended = self._mark

    def figures(self) -> dict[str, Any]:
        """Per phase: its steps, each block's CPU-seconds, and the updates' sums and
        counts on reduction steps and on the others (JSON-serializable)."""
        return {"steps": dict(self.steps), "cpu": self.cpu, "updates": self.updates}
