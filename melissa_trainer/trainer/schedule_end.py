"""A learning-rate schedule sized in steps, against a run whose length follows the stream.

A scheduler that raises past its total (`OneCycleLR`: `core.schedule_length.steps_left`)
would end an online run with torch's words at the step after its total, with no
checkpoint of the steps since the last save. Instead:

* before training starts (after a resume: the scheduler's restored count),
  `check_schedule` refuses a `max_steps` past the schedule's end, and a schedule with
  no step left (a resume of a run that stopped there), with a `ScheduleEnded` naming
  the scheduler, its total and the fix; with `max_steps` unset it warns that the run
  stops at the schedule's end if the stream lasts longer. It returns the step the
  schedule ends at, which the loop compares with `global_step` before each step (an
  int comparison: no cost);
* there, `schedule_ended` writes the checkpoint of that step through the failure
  path (`ending.save_at_failure`; every rank reaches the same step, since every rank
  steps its scheduler alike) and returns the `ScheduleEnded` to raise, with what a
  resume does.

Any other scheduler whose step raises (its end not readable without torch's private
attributes: a `LambdaLR` over a list, a `OneCycleLR` inside a `SequentialLR` or a
`ChainedScheduler`, a scheduler of the user's) raises after the optimizer's step
(`core.accelerated.step_scheduler`: a `SchedulerStepError`). The step is trained, so
the trainer counts it, and `schedule_failed` writes its checkpoint the same way and
returns the `ScheduleEnded` to raise, the scheduler's error as its cause: nothing
trained is lost, whatever the scheduler.

Training thread only; `schedule_ended` and `schedule_failed` are collective (the
save: every rank's scheduler raises at the same step, as every rank steps it alike).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from melissa_trainer.core.schedule_length import (
    SIZING,
    SchedulerStepError,
    schedule_words,
    steps_left,
)
from melissa_trainer.trainer.ending import failure_words, save_at_failure

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["ScheduleEnded", "check_schedule", "schedule_ended", "schedule_failed"]

logger = logging.getLogger(__name__)

#: how to train past a schedule's end on a resume (docs/resume.md)
EXTEND = (
    "to train on past it, resume with a longer schedule as docs/resume.md, "
    "'Schedules sized in steps', shows (a resume restores the checkpoint's total)"
)


class ScheduleEnded(ValueError):
    """The learning-rate schedule has no step left before the run's end: raised before
    training starts (`max_steps` past it, or none left at a resume), or at the step it
    ends at, once that step's checkpoint is written; or the scheduler raised at its step
    (its error the ``__cause__``), once the checkpoint of that step is written."""


def check_schedule(trainer: OnlineTrainer) -> int | None:
    """The step at which `trainer.lr_scheduler`'s schedule ends (None: it does not say,
    or there is none), checked against ``max_steps``, after any resume and before the
    source starts.

    Raises:
        ScheduleEnded: ``max_steps`` past the schedule's end, or no step left.
    """
    scheduler = trainer.lr_scheduler
    left = steps_left(scheduler)
    if left is None:
        return None
    step, max_steps = trainer.state.global_step, trainer.state.max_steps
    end = step + left
    name = schedule_words(scheduler)
    if left == 0:
        raise ScheduleEnded(
            f"the lr_scheduler {name} has no step left at step {step} (a run resumed "
            f"where its schedule ended): another step would raise; {EXTEND}, or train "
            "no further"
        )
    if max_steps is not None and max_steps > end:
        raise ScheduleEnded(
            f"max_steps {max_steps} is past the end of the lr_scheduler {name}, at "
            f"step {end}: its step {end + 1} would raise. Pass max_steps={end} "
            f"(--max_steps {end}), or size the schedule from max_steps "
            f"(OneCycleLR(..., total_steps=args.max_steps))"
        )
    if max_steps is None and trainer.is_main_process:
        logger.warning(
            "the lr_scheduler %s ends at step %d and max_steps is unset: if the stream "
            "lasts longer, training stops there with an error (its checkpoint written); "
            "%s",
            name,
            end,
            SIZING,
        )
    return end


def schedule_ended(trainer: OnlineTrainer, check_losses: Callable[[], None]) -> ScheduleEnded:
    """At the step the schedule ends at (`check_schedule`), before another step: the
    checkpoint of this step written (`ending.save_at_failure`, together: every rank is
    here at the same step), and the error to raise, naming the scheduler, the step, the
    fix and what a resume does. `check_losses`: the loss guard's check of the steps since
    the last one (no checkpoint holds a non-finite loss). Collective."""
    state = trainer.state
    written, why = save_at_failure(trainer, check_losses, together=True)
    name = schedule_words(trainer.lr_scheduler)
    return ScheduleEnded(
        f"training stopped at step {state.global_step}, the end of the lr_scheduler "
        f"{name}, the stream not ended: another step would raise (torch's 'Tried to "
        f"step N times'). {SIZING}. " + failure_words(trainer, written, why, EXTEND)
    )


def schedule_failed(
    trainer: OnlineTrainer, failed: SchedulerStepError, check_losses: Callable[[], None]
) -> ScheduleEnded:
    """After the lr_scheduler raised at its step (`failed`, its error the cause), the
    step's optimizer update done and counted in ``global_step`` by the caller: the
    checkpoint of this step written (`ending.save_at_failure`, together; it holds the
    scheduler as it raised, one step on), and the error to raise (``from`` the
    scheduler's), naming the scheduler, the step, its error, the fix and what a resume
    does. Collective, as `schedule_ended`."""
    written, why = save_at_failure(trainer, check_losses, together=True)
    cause = failed.__cause__
    said = f"{type(cause).__name__}: {cause}" if cause is not None else "no error given"
    return ScheduleEnded(
        f"training stopped at step {trainer.state.global_step}: the lr_scheduler "
        f"{schedule_words(failed.scheduler)} raised at its step after that step's "
        f"optimizer update ({said}), the stream not ended: its schedule is shorter than "
        f"the run (or it failed); {SIZING} (a LambdaLR's list, a SequentialLR's "
        "milestones and totals too). " + failure_words(trainer, written, why, EXTEND)
    )
