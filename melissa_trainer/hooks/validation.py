"""When to validate: every `eval_steps` steps, and once at the end of training."""

from __future__ import annotations

from typing import TYPE_CHECKING

from melissa_trainer.hooks.base import Hook
from melissa_trainer.state import TrainerControl, TrainerState

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer import OnlineTrainer


class ValidationHook(Hook):
    """Requests validation every `eval_steps` steps (None: only at the end) and, with
    `at_end`, after the last step (`on_loop_end`) unless done there already or the run
    was preempted (the resumed run validates at its end).

    The trainer runs it (`OnlineTrainer.evaluate`): each rank evaluates its share of
    `eval_dataset` and the mean loss is reduced over ranks. Decided from
    `state.global_step`, so every rank requests it at the same step.
    """

    def __init__(self, eval_steps: int | None, at_end: bool = True) -> None:
        self.eval_steps = eval_steps
        self.at_end = at_end
        self._last_step = -1  # validation already done at this step (not state: redo on resume)

    def on_step_end(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        if self.eval_steps and state.global_step % self.eval_steps == 0:
            control.should_validate = True
            self._last_step = state.global_step

    def on_loop_end(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        # not on preemption: the time before the job is killed goes to the checkpoint
        preempted = trainer.preempted_by is not None
        if self.at_end and not preempted and self._last_step != state.global_step:
            control.should_validate = True
