"""The host waits of `OnlineTrainer.train()` outside its actions, each inside the
trainer's wait watch (`core.wait_watch`, `StopSync.watch`) with its own usual cause: the
barrier once every rank's source started (`sources_started`), the loss check of the
last window after the loop (`last_window_check`), and a window's steps (`run_window`: a
span of steps, which warns when none completes for long: on a CPU run a rank whose
peer stopped mid-window waits in DDP's backward, which no wait watches).

A rank held in one by another (stopped, hung, slow) warns, naming the wait, instead of
waiting silently until the process group's timeout. Nothing is watched in a single
process (no collective: every rank watches alike).

Training thread only, as the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from melissa_trainer.core.wait_words import LAST_STEPS_USUAL, SOURCES_USUAL
from melissa_trainer.hooks.raised import method_name
from melissa_trainer.trainer.exit_meeting import agree_meet_bound
from melissa_trainer.trainer.reporting import watched

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer
    from melissa_trainer.trainer.source_failure import SourceFailure

__all__ = ["last_window_check", "run_window", "sources_started"]


def sources_started(trainer: OnlineTrainer) -> float | None:
    """Wait until every rank's source has started (under several ranks, an all-reduce
    that is also the ranks' agreement on the bound of their last meeting:
    `exit_meeting.agree_meet_bound`, whose refusal it raises); returns that bound (None
    with one process: no meeting)."""
    if trainer.num_processes <= 1:
        return None
    at = "the start of training, once every rank's source started (a barrier)"
    with watched(trainer, at, SOURCES_USUAL):
        return agree_meet_bound(trainer.process_index, trainer.source, trainer.accelerator.device)


def last_window_check(
    trainer: OnlineTrainer,
    check: Callable[[], None],
    failure: SourceFailure | None = None,
    signum: int = 0,
) -> None:
    """The loss guard's `check` of the last window's losses, after the loop (an
    all-reduce under several ranks): raises `NonFiniteLossError` as `LossGuard.check`.
    First, under several ranks, a failure held since the loop's last agreement (a
    scheduler's raise in its last window; `failure`, this `train()`'s held failures)
    is agreed on (`SourceFailure.at_end`, with `signum`, the preemption the loop
    agreed on): what every rank raises then."""
    if failure is not None and (agreed := failure.at_end(signum, check)):
        raise agreed
    at = f"step {trainer.state.global_step}'s loss check after the loop (an all-reduce)"
    with watched(trainer, at, LAST_STEPS_USUAL):
        check()


def run_window(trainer: OnlineTrainer, steps: int, after: int, step: Callable[..., None]) -> None:
    """Run a window's `steps` steps (`step`: the trainer's, the next step's batch staged
    but at the last), inside the watch's span of steps under several ranks
    (`WaitWatch.stepping`: judged once the step count exceeds `after`, the count at
    `train()`'s start, so that a first step's compile is never judged)."""
    if not trainer.stop_sync.distributed:
        for i in range(steps):
            step(stage_next=i + 1 < steps)
        return
    state = trainer.state
    hooks = trainer.hooks

    def doing() -> str | None:  # the hook method in progress (the watch's thread reads it)
        firing = hooks.firing
        return None if firing is None else method_name(firing)

    with trainer.stop_sync.watch.stepping(lambda: state.global_step, after, doing):
        for i in range(steps):
            step(stage_next=i + 1 < steps)
