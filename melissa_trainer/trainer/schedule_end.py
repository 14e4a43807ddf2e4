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
the trainer counts it; in a single process `schedule_failed` writes its checkpoint the
same way and returns the `ScheduleEnded` to raise, the scheduler's error as its cause:
nothing trained is lost, whatever the scheduler.

Under several ranks a scheduler may raise on one rank only (a user's lambda that reads a
file on rank 0): a rank that went straight into the collective save met the others in
DDP's backward or the stop agreement (gloo aborted on the mismatch, the user's error
said nowhere). So there the failure is held as a source's is
(`source_failure.SourceFailure.hold_schedule`: noted for the others, said in the next
stop agreement), the rank trains on in step with the others (its scheduler stepped on,
so that its count stays the others'), and at the agreement that carries it every rank
writes the checkpoint of that step together: the failing rank raises `schedule_failed`'s
`ScheduleEnded` (naming the step it raised at, and the step of the checkpoint), the
others `RankFailed` naming it. Every rank does so, whether one rank's scheduler raised
or all of them at the same step: no rank can tell without a collective per step.

Training thread only; `schedule_ended` is collective (every rank reaches the same step,
as every rank steps its scheduler alike), and so is `schedule_failed` under several
ranks (at the agreement). Their saves are paused in the wait watch's span of steps
(`WaitWatch.pause`, as an action point's: a long save is not a stalled step).
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
from melissa_trainer.trainer.ending import save_at_failure
from melissa_trainer.trainer.rank_reports import agree
from melissa_trainer.trainer.resume_words import failure_words

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.ending import EndingTrainer
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = [
    "ScheduleEnded",
    "check_schedule",
    "schedule_ended",
    "schedule_failed",
    "schedule_note",
    "scheduler_error",
]

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

    Under several ranks every rank's end is compared first (one all-gather, once a
    run): the end's checkpoint is written by every rank together at that step, so a
    rank whose schedule ends elsewhere (its own ``total_steps``) would meet the others
    in another collective.

    Raises:
        ScheduleEnded: ``max_steps`` past the schedule's end, no step left, or the
            ranks' schedules ending at different steps.
    """
    scheduler = trainer.lr_scheduler
    left = steps_left(scheduler)
    step, max_steps = trainer.state.global_step, trainer.state.max_steps
    ends = agree(trainer, None if left is None else step + left, "the lr_scheduler's end")
    if len(set(ends)) > 1:
        each = ", ".join(
            f"rank {rank}: {'unknown' if end is None else f'step {end}'}"
            for rank, end in enumerate(ends)
        )
        raise ScheduleEnded(
            f"the ranks' lr_schedulers end at different steps ({each}): every rank "
            "must build the same schedule (the same total_steps, e.g. from "
            "args.max_steps, not from a count of its own), since the ranks step "
            "together and write the end's checkpoint together"
        )
    if left is None:
        return None
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
    with trainer.stop_sync.watch.pause():  # (no step expected: `run_waits.run_window`)
        written, why = save_at_failure(trainer, check_losses, together=True)
    name = schedule_words(trainer.lr_scheduler)
    return ScheduleEnded(
        f"training stopped at step {state.global_step}, the end of the lr_scheduler "
        f"{name}, the stream not ended: another step would raise (torch's 'Tried to "
        f"step N times'). {SIZING}. " + failure_words(trainer, written, why, EXTEND)
    )


def schedule_failed(
    trainer: EndingTrainer,
    failed: SchedulerStepError,
    check_losses: Callable[[], None],
    together: bool = True,
    raised_at: int | None = None,
) -> ScheduleEnded:
    """After the lr_scheduler raised at its step (`failed`, its error the cause), the
    step's optimizer update done and counted in ``global_step`` by the caller: the
    checkpoint of this step written (`ending.save_at_failure`, with `together`: in a
    single process, or by every rank at the agreement on the failure; False: another
    rank is gone, none is written), and the error to raise, its ``__cause__`` the
    scheduler's error, naming the scheduler, the step, its error, the fix and what a
    resume does. `raised_at`: the step the scheduler raised at when the ranks trained on
    to this one, the agreement's (module docstring; None: this step). Collective under
    several ranks with `together`."""
    step = trainer.state.global_step
    with trainer.stop_sync.watch.pause():  # (no step expected: `run_waits.run_window`)
        written, why = save_at_failure(trainer, check_losses, together)
    raised = step if raised_at is None else raised_at
    on = "" if raised == step else (
        f"; every rank trained on to step {step}, where the ranks agreed to stop (one "
        "agreement per stop_sync_steps window)"
    )  # fmt: skip
    ended = ScheduleEnded(
        f"training stopped at step {step}: the lr_scheduler "
        f"{schedule_words(failed.scheduler)} raised at its step {raised} after that "
        f"step's optimizer update ({scheduler_error(failed)}){on}, the stream not ended: "
        f"its schedule is shorter than the run (or it failed); {SIZING} (a LambdaLR's "
        "list, a SequentialLR's milestones and totals too). "
        + failure_words(trainer, written, why, EXTEND)
    )
    ended.__cause__ = failed.__cause__  # (as ``raise ... from``: the user's traceback)
    return ended


def scheduler_error(failed: SchedulerStepError) -> str:
    """The scheduler's error of `failed` in a line: its class and message."""
    cause = failed.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else "no error given"


def schedule_note(failed: SchedulerStepError, step: int) -> ScheduleEnded:
    """What a rank whose scheduler raised at `step` notes for the others before they
    agree on it (`rank_failure.write_note`: the `RankFailed` they raise names it)."""
    return ScheduleEnded(
        f"the lr_scheduler {schedule_words(failed.scheduler)} raised at its step {step} "
        f"({scheduler_error(failed)})"
    )
