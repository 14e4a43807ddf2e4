"""When to log, validate and save: the run's cadence, in one hook.

`FlowHook` decides *when*; the trainer decides *how* (`OnlineTrainer.log`, `evaluate`,
`save_checkpoint`); the rendering hooks (`ProgressHook`, `TensorBoardHook`) only show
what `on_log` and `on_validation_end` hand them. So TensorBoard gets its scalars
without the progress bar, and removing a renderer never changes what is computed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from melissa_trainer.core.state import TrainerControl, TrainerState
from melissa_trainer.hooks.base import Hook

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView


class FlowHook(Hook):
    """Requests a log every `logging_steps` steps, a validation every `eval_steps` steps
    and a checkpoint every `save_steps` steps (None: not periodically), then, after the
    last step (`on_loop_end`), whatever was not done at that step: a log, a validation
    (with `validate_at_end`, not on preemption: the time before the job is killed goes
    to the checkpoint, and the resumed run validates at its end) and a checkpoint (with
    `save_at_end`; on preemption the trainer writes one whatever this hook says).

    Built by `default_hooks` from `TrainingArguments`; built by hand, it asks for
    nothing but logs unless told (`eval_steps`, `save_steps`, `*_at_end`).

    Stateless: it decides from `state.global_step` and the steps of the last log,
    validation and checkpoint in `TrainerState`, so every rank requests the same actions
    at the same steps (they are collectives), also after a resume.
    """

    def __init__(
        self,
        logging_steps: int,
        eval_steps: int | None = None,
        save_steps: int | None = None,
        *,
        validate_at_end: bool = False,
        save_at_end: bool = False,
    ) -> None:
        for name, value in (("eval_steps", eval_steps), ("save_steps", save_steps)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if logging_steps < 1:
            raise ValueError(f"logging_steps must be >= 1, got {logging_steps}")
        self.logging_steps = logging_steps
        self.eval_steps = eval_steps
        self.save_steps = save_steps
        self.validate_at_end = validate_at_end
        self.save_at_end = save_at_end

    def on_step_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        step = state.global_step
        if step % self.logging_steps == 0:
            control.should_log = True
        if self.eval_steps and step % self.eval_steps == 0:
            control.should_validate = True
        if self.save_steps and step % self.save_steps == 0:
            control.should_save = True

    def on_loop_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        step = state.global_step
        if step > state.last_log_step:
            control.should_log = True
        preempted = trainer.preempted_by is not None
        if self.validate_at_end and not preempted and state.last_eval_step != step:
            control.should_validate = True
        if self.save_at_end and state.last_save_step != step:
            control.should_save = True
