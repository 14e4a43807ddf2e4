"""`trainer.accelerator.sync_gradients` in a hook under gradient accumulation: Accelerate's
idiom for "this micro-batch completes the step's gradients" (False on the others). Under
DDP the trainer's `AcceleratedStep` runs Accelerate's `accumulate`, which sets it; on one
process the trainer's `PlainStep` ran no `accumulate` and left it True on every
micro-batch, so a hook logging the gradient norm `if trainer.accelerator.sync_gradients`
logged each partial sum on one process and the whole one under 2 ranks (htrial11, an
Accelerate user's trial: measured False/True under 2 gloo ranks, True/True on one).
This test failed before. The oracle: Accelerate's documented meaning, and the gradient
itself (the step's last micro-batch is the one whose gradient no later backward adds to).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainerState, TrainingArguments
from melissa_trainer.core.accelerated import PlainStep

pytestmark = pytest.mark.timeout(120)


class SyncFlags(Hook):
    """Each micro-batch's (step, sync_gradients), read in on_after_backward."""

    def __init__(self) -> None:
        self.flags: list[tuple[int, bool]] = []

    def on_after_backward(self, trainer: Any, state: TrainerState, control: Any, loss: Any) -> None:
        self.flags.append((state.global_step, bool(trainer.accelerator.sync_gradients)))


def _flags(tmp_path: Path, accumulation: int, steps: int) -> tuple[OnlineTrainer, SyncFlags]:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=4,
        gradient_accumulation_steps=accumulation,
        buffer="fifo",
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
        max_steps=steps,
    )
    model = small_model(0)
    hook = SyncFlags()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.01),
        train_source=list(linear_samples(64)),
        process_sample=xy,
        hooks=[hook],
    )
    trainer.train()
    return trainer, hook


def test_one_process_says_the_last_micro_batch_of_each_step(tmp_path: Path) -> None:
    trainer, hook = _flags(tmp_path, accumulation=3, steps=2)
    assert isinstance(trainer._step, PlainStep)  # (the path that set no flag before)
    assert hook.flags == [
        (0, False), (0, False), (0, True),
        (1, False), (1, False), (1, True),
    ]  # fmt: skip
    assert trainer.accelerator.sync_gradients  # left as Accelerate's default after a step


def test_without_accumulation_every_micro_batch_syncs(tmp_path: Path) -> None:
    _, hook = _flags(tmp_path, accumulation=1, steps=3)
    assert hook.flags == [(0, True), (1, True), (2, True)]
