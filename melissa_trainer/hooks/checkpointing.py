"""When to write checkpoints: every `save_steps` steps and at the end of training.

How a checkpoint is written (atomically, rotated to `max_to_keep`) is the trainer's
`save_checkpoint`; restoring one at start is driven by
`TrainingArguments.resume_from_checkpoint` ("latest" or a path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from melissa_trainer.hooks.base import Hook
from melissa_trainer.state import TrainerControl, TrainerState

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer import OnlineTrainer


class CheckpointHook(Hook):
    """Requests a checkpoint every `save_steps` steps (None: never periodically) and,
    with `save_at_end`, after the last step (`on_loop_end`) unless one was just written
    there. (On preemption the trainer writes one whatever this hook says.)"""

    def __init__(self, save_steps: int | None, save_at_end: bool = True) -> None:
        self.save_steps = save_steps
        self.save_at_end = save_at_end
        self._saved_step = -1

    def on_step_end(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        if self.save_steps and state.global_step % self.save_steps == 0:
            control.should_save = True

    def on_save(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        self._saved_step = state.global_step

    def on_loop_end(
        self, trainer: OnlineTrainer, state: TrainerState, control: TrainerControl
    ) -> None:
        if self.save_at_end and self._saved_step != state.global_step:
            control.should_save = True
