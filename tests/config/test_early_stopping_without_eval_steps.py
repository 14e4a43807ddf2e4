"""`early_stopping_patience` without `eval_steps` (trial 5's F9): the built-in hooks
validate only at the end, so early stopping cannot stop the run, and nothing said so.
It is a warning naming `eval_steps`, not an error: a hook of the user's that sets
`control.should_validate` gives early stopping its validations (shown below)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.config.argument_checks import early_stopping_warning

pytestmark = pytest.mark.timeout(120)


def test_the_rule() -> None:
    said = early_stopping_warning({"early_stopping_patience": 2, "eval_steps": None})
    assert said is not None
    assert "early_stopping_patience=2 without eval_steps" in said and "--eval_steps N" in said
    assert early_stopping_warning({"early_stopping_patience": 2, "eval_steps": 5}) is None
    assert early_stopping_warning({"early_stopping_patience": None, "eval_steps": None}) is None


class ValidateEveryStep(Hook):
    """Asks for a validation at each step: early stopping's validations, without eval_steps."""

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        control.should_validate = True


def run(out: Path, hooks: list[Hook], **overrides: Any) -> OnlineTrainer:
    options: dict[str, Any] = dict(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        max_steps=30,
        logging_steps=10,
        early_stopping_patience=1,
        save_at_end=False,
        report_to="none",
        disable_progress_bar=True,
    )
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(**{**options, **overrides}),
        torch.optim.SGD(model.parameters(), lr=0.0),  # no progress: patience runs out
        train_source=list(linear_samples(800, 0)),
        process_sample=xy,
        eval_dataset=list(linear_samples(8, 5)),
        hooks=hooks,
    )
    trainer.train()
    return trainer


def test_without_eval_steps_the_trainer_warns_and_does_not_stop(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="early_stopping_patience=1 without eval_steps"):
        trainer = run(tmp_path / "out", [])
    assert trainer.state.global_step == 30  # the one validation came at the end


def test_with_eval_steps_no_warning_and_it_stops(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*without eval_steps")
        trainer = run(tmp_path / "out", [], eval_steps=2)
    assert trainer.state.global_step < 30


def test_a_hook_asking_for_validations_lets_it_stop_so_it_is_no_error(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="unless a hook of yours sets control.should_validate"):
        trainer = run(tmp_path / "out", [ValidateEveryStep()])
    assert trainer.state.global_step < 30
