"""How many steps a learning-rate scheduler has left, where it says so.

Online, the number of optimizer steps is not known in advance: it follows the data
streamed (and `max_steps`). A scheduler sized to a number of steps that raises past it
(torch's `OneCycleLR`: "Tried to step 6 times. The specified number of total steps is
5") would end the run at its last step with torch's words. `steps_left` reads what
such a scheduler exposes, so that the trainer can check it against `max_steps` before
training starts and stop at the schedule's end with a checkpoint
(`melissa_trainer.trainer.schedule_end`). Any other scheduler that raises at its step
(a `LambdaLR` over a list, a `OneCycleLR` inside a `SequentialLR`: its end is not
readable without torch's private attributes) is caught there: `SchedulerStepError`
carries its error from `accelerated`'s `update` to the trainer, which stops with that
step's checkpoint written (`schedule_end.schedule_failed`).

Pure functions of the scheduler's attributes: no tensor, no host sync.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["SchedulerStepError", "schedule_words", "steps_left"]

#: how to size a schedule online (docs/resume.md's section)
SIZING = (
    "online, the number of steps follows the stream and is not known in advance: pass "
    "max_steps (--max_steps) so the run stops at the schedule's end, or size the "
    "schedule from it (OneCycleLR(..., total_steps=args.max_steps)); docs/resume.md, "
    "'Schedules sized in steps'"
)


def steps_left(scheduler: Any | None) -> int | None:
    """How many more `step()` calls `scheduler` takes before it raises (0: the next
    raises), or None when it does not say (most schedulers never raise: `StepLR`,
    `CosineAnnealingLR` cycles, `LinearLR` holds its end; a `LambdaLR`'s function is
    the user's; a `SequentialLR` or `ChainedScheduler` keeps its schedulers private).
    Known: `OneCycleLR` (``total_steps - last_epoch``: it raises once ``last_epoch``
    passes ``total_steps``)."""
    if isinstance(scheduler, torch.optim.lr_scheduler.OneCycleLR):
        return max(int(scheduler.total_steps) - int(scheduler.last_epoch), 0)
    return None


def schedule_words(scheduler: Any) -> str:
    """The scheduler as a user wrote it, with its total where it has one:
    ``OneCycleLR(total_steps=5)``, else its class name."""
    if isinstance(scheduler, torch.optim.lr_scheduler.OneCycleLR):
        return f"OneCycleLR(total_steps={scheduler.total_steps})"
    return type(scheduler).__name__


class SchedulerStepError(Exception):
    """`scheduler.step()` raised at the trainer's optimizer step, after the optimizer's
    step (the step's weights updated: the trainer counts it). Its ``__cause__`` is the
    scheduler's error, raised again by the trainer as the cause of its
    `ScheduleEnded`; internal: the trainer never lets this one reach a user."""

    def __init__(self, scheduler: Any) -> None:
        super().__init__(f"the lr_scheduler {schedule_words(scheduler)} raised at its step")
        self.scheduler = scheduler
