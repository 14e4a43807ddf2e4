"""A hook that asks for a validation in a trainer without an `eval_dataset`: the error
names the request and the fix, not the internal `evaluate()` call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(60)


class ValidateAtTwo(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == 2:
            control.should_validate = True


def test_a_validation_asked_without_an_eval_dataset_names_the_fix(tmp_path: Path) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
    )
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(80, 0)),
        process_sample=xy,
        hooks=[ValidateAtTwo()],
    )
    with pytest.raises(ValueError, match=r"a hook set control\.should_validate, but this"):
        trainer.train()
    assert trainer.state.global_step == 2  # at the action point of the step that asked
    with pytest.raises(ValueError, match=r"eval_dataset=\.\.\."):  # called directly
        trainer.evaluate()
