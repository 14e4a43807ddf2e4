"""A preempted run says "writing a checkpoint" when it writes it: after the hooks'
`on_loop_end` (which may still change the state the checkpoint holds) and the final
action point, not before LOOP_END; and when the final action point wrote it already
(``save_at_end``), it says so instead of announcing one more."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Hook
from melissa_trainer.trainer.preempted import Preempted


class Order(logging.Handler, Hook):
    """Sends SIGTERM at the end of step `step`; records, in one list and in order, the
    end events and the trainer's WARNINGs about the stop (`melissa_trainer.trainer.ending`)."""

    def __init__(self, step: int) -> None:
        logging.Handler.__init__(self, logging.WARNING)
        self.step = step
        self.order: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.order.append(record.getMessage())

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)

    def on_loop_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self.order.append(f"loop_end@{state.global_step}")

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        self.order.append(f"save@{state.global_step}")


def run(out: Path, save_at_end: bool) -> tuple[list[str], int]:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    hook = Order(3)
    logger = logging.getLogger("melissa_trainer.trainer.ending")
    logger.addHandler(hook)
    try:
        model = small_model()
        trainer = OnlineTrainer(
            model,
            TrainingArguments(
                output_dir=str(out),
                batch_size=8,
                buffer="fifo",
                buffer_size=64,
                watermark=8,
                stop_sync_steps=2,
                logging_steps=1000,
                report_to="none",
                disable_progress_bar=True,
                save_at_end=save_at_end,
            ),
            torch.optim.SGD(model.parameters(), lr=1e-2),
            train_source=list(linear_samples(400)),
            process_sample=xy,
            hooks=[hook],
        )
        with pytest.raises(Preempted) as info:
            trainer.train()
    finally:
        logger.removeHandler(hook)
    return hook.order, info.value.step


@pytest.mark.timeout(60)
def test_writing_a_checkpoint_is_said_after_on_loop_end_as_it_is_written(tmp_path: Path) -> None:
    order, step = run(tmp_path / "out", save_at_end=False)
    said = f"SIGTERM: rank 0 stopped at step {step}, as every rank; writing a checkpoint"
    assert order[:3] == [f"loop_end@{step}", said, f"save@{step}"], order


@pytest.mark.timeout(60)
def test_a_checkpoint_written_at_the_final_action_point_is_said_written(tmp_path: Path) -> None:
    order, step = run(tmp_path / "out", save_at_end=True)
    said = f"SIGTERM: rank 0 stopped at step {step}, as every rank; its checkpoint is written"
    assert order[:3] == [f"loop_end@{step}", f"save@{step}", said], order
    assert not [line for line in order if "writing a checkpoint" in line], order
