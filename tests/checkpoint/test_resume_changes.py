"""Resuming with something changed since the checkpoint was written. Changed settings
are named, once, on the main rank (a user who resumes with another batch size is told,
as Hugging Face's Trainer tells them); an unchanged resume says nothing of the kind
(the oracle: the arguments each run was given, not the checkpoint's file). A model of
another shape is refused with the fix, not with other checkpoints of the same run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, xy
from tiny_resume import said, tiny_run

from melissa_trainer import CheckpointError, OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint.resumed_args import changed_settings

pytestmark = pytest.mark.timeout(90)

WARNING = "with settings changed since it was written"


def run(out: Path, **overrides: Any) -> OnlineTrainer:
    return tiny_run(out, save_steps=5, **overrides)


def resume_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return said(caplog, WARNING)


def test_a_resume_with_changed_settings_names_each_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(tmp_path / "out", max_steps=10)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        run(
            tmp_path / "out",
            max_steps=20,
            batch_size=4,
            gradient_accumulation_steps=2,
            resume_from_checkpoint="latest",
            disable_progress_bar=False,  # how the run shows itself: not named
        )
    (message,) = resume_warnings(caplog)
    assert "checkpoint-10" in message
    assert "batch_size 8 -> 4" in message
    assert "gradient_accumulation_steps 1 -> 2" in message
    # max_steps: the documented way to train longer, not named
    for quiet in ("max_steps", "resume_from_checkpoint", "disable_progress_bar", "output_dir"):
        assert quiet not in message


def test_a_resume_with_the_same_settings_says_nothing_of_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(tmp_path / "out", max_steps=10)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        trainer = run(tmp_path / "out", max_steps=10, resume_from_checkpoint="latest")
    assert trainer.state.global_step == 10
    assert resume_warnings(caplog) == []


def test_changed_settings_compares_as_the_json_holds_them() -> None:
    """A tuple is a list once in the JSON; a setting the checkpoint lacks (an earlier
    version's) is no change."""
    saved = {"batch_size": 8, "shape": [1, 2], "seed": 1}
    current = {"batch_size": 8, "shape": (1, 2), "seed": 2, "new_option": True}
    assert changed_settings(saved, current) == ["seed 1 -> 2"]


def test_a_checkpoint_of_another_model_shape_is_refused_with_the_fix(tmp_path: Path) -> None:
    """Resumed with a model of another width, the run is refused before it trains, the
    error names the mismatch and how to go on, and offers none of the run's other
    checkpoints (of the same model, they would not fit either)."""
    run(tmp_path / "out", max_steps=10)  # checkpoints 5 and 10, of a 16-wide layer
    torch.manual_seed(0)
    wider = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=32,
        watermark=16,
        report_to="none",
        disable_progress_bar=True,
        resume_from_checkpoint="latest",
    )
    trainer = OnlineTrainer(
        wider,
        args,
        torch.optim.Adam(wider.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(200, seed=3),
        process_sample=xy,
    )
    with pytest.raises(CheckpointError) as caught:
        trainer.train()
    message = str(caught.value)
    assert "size mismatch for 0.weight" in message
    assert str(tmp_path / "out" / "checkpoints" / "checkpoint-10" / "training_args.json") in message
    assert "--output_dir" in message and "--overwrite_output_dir" in message
    assert "checkpoint-5" not in message and "--resume_from_checkpoint" not in message
    assert trainer.state.global_step == 0


def test_a_resume_at_or_past_max_steps_says_nothing_is_left_to_train(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A user resuming a run that stopped at max_steps 10 with --max_steps 8 (or 10) got
    a run that ended at once, the checkpoint's step, without a word of why."""
    run(tmp_path / "out", max_steps=10)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        trainer = run(tmp_path / "out", max_steps=8, resume_from_checkpoint="latest")
    assert trainer.state.global_step == 10
    (message,) = [r.getMessage() for r in caplog.records if "nothing is left" in r.getMessage()]
    assert "is at step 10, at or past max_steps=8" in message and "--max_steps" in message
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        run(tmp_path / "out", max_steps=12, resume_from_checkpoint="latest")  # 2 more steps
    assert not [r for r in caplog.records if "nothing is left" in r.getMessage()]
