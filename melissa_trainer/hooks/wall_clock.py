"""`WallClockBudget`: train for a wall-clock budget, the learning rate held, then decayed.

A user with a time budget (an allocation, a node for two hours) rather than a step
count cannot give a step-based scheduler its length. This hook reads the clock instead:

    trainer = OnlineTrainer(model, args, optimizer, train_source=study,
                            hooks=[WallClockBudget(3600, decay_from=0.8)])

holds every parameter group's rate at its initial value for the first 80% of the hour,
decays it to 0 along a half cosine over the last 20% (`budget_factor`: a
warmup-stable-decay schedule without the warmup; ``decay_from=0`` is the plain cosine
over the budget), and stops the training when the hour is up. Why hold, then decay,
when the data streams: an online run sees its last simulations late, and a rate
already decayed by then barely learns them (`docs/when-online-pays.md`, "Why online
ends 3% short at equal wall time"); holding the rate while the data arrives and
decaying over what the buffer holds at the end trains on every part of the stream.

Contracts:

* The clock starts at TRAIN_START (the watermark's wait counts: it is the budget's
  time) and counts the training's wall time; a resumed run goes on from the seconds
  its checkpoint recorded (`state_dict`), not from 0.
* The rate is set at each STEP_START from the progress agreed at the last update:
  every `update_steps` steps (and at the first step) the ranks agree on the largest
  elapsed time of any rank (one all-reduce of a float under several processes, none
  with one), so that every rank applies the same rate at the same step (different
  rates would make the replicas' weights diverge) and stops at the same step. The
  rate is therefore constant over `update_steps` steps at a time. That all-reduce is
  watched (the trainer's `StopSync.watch`: a rank held there by a stopped or hung one
  warns); its cost, a lock taken twice, is nothing beside the all-reduce's host sync.
* The base rate of each parameter group is its ``initial_lr`` (set to its ``lr`` at
  the first step if absent, as torch's schedulers do; it is part of the optimizer's
  state, so a resumed run decays from the same base).
* The stop is a ``control.should_stop`` request: it takes effect at the trainer's next
  stop synchronisation (up to `stop_sync_steps` steps later, `TrainerControl`), at
  rate 0 by then.
* It owns the learning rate: a trainer given an ``lr_scheduler`` too is refused at
  TRAIN_START (``ValueError``), as two rules fighting over the rate would be silent.

Not thread-safe; called from the training thread, as every hook.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.core.wait_words import STEPS_USUAL
from melissa_trainer.hooks.hook import Hook

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["WallClockBudget", "budget_factor"]


def budget_factor(progress: float, decay_from: float = 0.0) -> float:
    """The rate's multiplier at `progress` (the fraction of the budget spent): 1 up to
    `decay_from`, then a half cosine down to 0 at 1 (0 beyond; 1 before 0).

    Also usable with a step budget: ``LambdaLR(optimizer, lambda step:
    budget_factor(step / total_steps, 0.8))``.

    Raises:
        ValueError: `decay_from` outside [0, 1).
    """
    if not 0.0 <= decay_from < 1.0:
        raise ValueError(
            f"decay_from must be in [0, 1) (the fraction of the budget), not {decay_from!r}"
        )
    p = min(max((progress - decay_from) / (1.0 - decay_from), 0.0), 1.0)
    return 0.5 * (1.0 + math.cos(math.pi * p))


class WallClockBudget(Hook):
    """Train for `seconds` of wall-clock time; the rate held to `decay_from` of it, then
    decayed to 0 (module docstring).

    Args:
        seconds: the budget (> 0).
        decay_from: the fraction of the budget after which the rate decays (in [0, 1);
            0: a cosine over the whole budget).
        update_steps: the rate (and the stop) is updated every this many steps (>= 1).
        clock: seconds, monotonic (tests give their own; default `time.monotonic`).

    Raises:
        ValueError: a bad argument, naming it.
    """

    def __init__(
        self,
        seconds: float,
        *,
        decay_from: float = 0.0,
        update_steps: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"seconds must be a finite number > 0 (the budget), not {seconds!r}")
        budget_factor(0.0, decay_from)  # (checks it)
        if isinstance(update_steps, bool) or not isinstance(update_steps, int) or update_steps < 1:
            raise ValueError(f"update_steps must be an int >= 1, not {update_steps!r}")
        self.seconds, self.decay_from, self.update_steps = float(seconds), decay_from, update_steps
        self._clock = clock
        self._before = 0.0  # seconds spent in earlier runs (a resumed checkpoint's)
        self._start: float | None = None  # the clock at this run's TRAIN_START
        self._steps = 0  # steps started in this run
        #: the progress agreed at the last update (the fraction of the budget spent)
        self.progress = 0.0

    def elapsed(self) -> float:
        """This rank's seconds of the budget spent (earlier runs' included)."""
        if self._start is None:
            return self._before
        return self._before + self._clock() - self._start

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if trainer.lr_scheduler is not None:
            raise ValueError(
                "WallClockBudget sets the learning rate from the clock: give the trainer "
                "no lr_scheduler as well (or drop the hook and schedule by steps)"
            )
        self._start = self._clock()
        self._steps = 0

    def on_step_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        if self._steps % self.update_steps == 0:
            self.progress = _agreed(trainer, self.elapsed()) / self.seconds
            if self.progress >= 1.0:  # (the words the end of the run prints)
                control.request_stop(f"WallClockBudget: its {self.seconds:g} s are spent")
        self._steps += 1
        factor = budget_factor(self.progress, self.decay_from)
        for group in trainer.optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
            group["lr"] = group["initial_lr"] * factor

    def state_dict(self) -> dict[str, Any]:
        return {"elapsed": self.elapsed()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        elapsed = state.get("elapsed")
        if not isinstance(elapsed, int | float) or not elapsed >= 0:
            raise ValueError(f"WallClockBudget: the checkpoint's elapsed is {elapsed!r}")
        self._before, self._start = float(elapsed), None


def _agreed(trainer: TrainerView, elapsed: float) -> float:
    """The largest `elapsed` of every rank (one all-reduce under several processes,
    watched: the host waits in it, to the read of its result)."""
    if trainer.num_processes <= 1 or not dist.is_initialized():
        return elapsed
    value = torch.tensor([elapsed], dtype=torch.float64, device=trainer.accelerator.device)
    what = "the other ranks at WallClockBudget's agreement on the time spent (an all-reduce)"
    with trainer.stop_sync.watch.waiting(what, STEPS_USUAL):
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return float(value.item())
