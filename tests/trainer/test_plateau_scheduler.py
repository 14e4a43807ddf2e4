"""A `ReduceLROnPlateau` given as the trainer's scheduler is refused at construction
(before: accepted, then torch's bare ``TypeError: step() missing ... 'metrics'`` at
step 0), naming the fix; the fix (docs/how-to/hooks.md, "A scheduler on the validation
metric") works: a hook steps it with the validation metric and keeps its state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.config.reading import ConfigError
from tests.helpers import linear_samples, small_model, xy


class PlateauScheduler(Hook):
    """The docs' recipe: step the scheduler with the validation metric."""

    def __init__(self, scheduler: torch.optim.lr_scheduler.ReduceLROnPlateau) -> None:
        self.scheduler = scheduler

    def on_validation_end(self, trainer: Any, state: Any, control: Any, metrics: Any) -> None:
        self.scheduler.step(metrics["eval_loss"])

    def state_dict(self) -> dict[str, Any]:
        return self.scheduler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state)


def _trainer(tmp_path: Path, scheduler_of_hook: bool) -> tuple[OnlineTrainer, torch.optim.SGD]:
    args = TrainingArguments(output_dir=str(tmp_path / "out"), batch_size=4, buffer="fifo",
                             buffer_size=32, logging_steps=100, eval_steps=2,
                             save_at_end=False, report_to="none",
                             disable_progress_bar=True)  # fmt: skip
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # an improvement must beat the best by 1e9: every validation after the first is a plateau
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, patience=0, factor=0.5, threshold=1e9, threshold_mode="abs"
    )
    trainer = OnlineTrainer(
        model, args, optimizer, None if scheduler_of_hook else plateau,
        train_source=list(linear_samples(24)), process_sample=xy,
        eval_dataset=list(linear_samples(8, seed=1)),
        hooks=[PlateauScheduler(plateau)] if scheduler_of_hook else (),
    )  # fmt: skip
    return trainer, optimizer


def test_a_plateau_scheduler_is_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _trainer(tmp_path, scheduler_of_hook=False)
    said = str(caught.value)
    assert "ReduceLROnPlateau" in said
    assert "lr_scheduler=None" in said and "on_validation_end" in said


def test_the_documented_fix_steps_it_with_the_metric(tmp_path: Path) -> None:
    trainer, optimizer = _trainer(tmp_path, scheduler_of_hook=True)
    trainer.train()  # 6 steps: validations at 2, 4, 6 (and none more at the end)
    assert optimizer.param_groups[0]["lr"] < 0.1  # reduced on a plateau
    (hook,) = [h for h in trainer.hooks.hooks if isinstance(h, PlateauScheduler)]
    json.dumps(hook.state_dict())  # a hook's state is kept as JSON in checkpoints
