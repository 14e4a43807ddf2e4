"""Resuming with the model built in another dtype than the checkpoint's weights.

`load_state_dict` converts the checkpoint's weights to the model's dtype, and the
optimizer's load casts its state likewise, without a word: a float32 run resumed with
``model.double()`` (or bfloat16, which rounds the weights) went on as another run. The
resume now names the change once, on the main rank; an unchanged resume says nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import small_model
from tiny_resume import said, tiny_run

from melissa_trainer import OnlineTrainer
from melissa_trainer.checkpoint.model_dtypes import changed_dtypes

pytestmark = pytest.mark.timeout(90)

WARNING = "with the model built in another dtype"


def run(out: Path, dtype: torch.dtype, **overrides: object) -> OnlineTrainer:
    """A tiny run whose model and samples are in `dtype`."""

    def sample(item: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(item["x"]).to(dtype), torch.from_numpy(item["y"]).to(dtype)

    return tiny_run(out, model=small_model(0).to(dtype), process_sample=sample, **overrides)


def dtype_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return said(caplog, WARNING)


def test_a_resume_in_another_dtype_names_the_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before the fix the float64 resume loaded and trained on without a warning."""
    run(tmp_path / "out", torch.float32, max_steps=4)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        trainer = run(tmp_path / "out", torch.float64, max_steps=6, resume_from_checkpoint="latest")
    assert trainer.state.global_step == 6
    assert next(trainer.model.parameters()).dtype == torch.float64  # the script's dtype won
    (message,) = dtype_warnings(caplog)
    assert "checkpoint-4" in message
    assert "float32 -> float64 (0.weight, 0.bias, 3.weight, 3.bias)" in message
    assert "build the model in float32 to continue it exactly" in message


def test_a_resume_in_the_same_dtype_says_nothing_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(tmp_path / "out", torch.float64, max_steps=4)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        run(tmp_path / "out", torch.float64, max_steps=6, resume_from_checkpoint="latest")
    assert not dtype_warnings(caplog)


def test_changed_dtypes_groups_by_pair_and_skips_tensors_one_side_lacks() -> None:
    saved = {"a": "float32", "b": "float32", "c": "bfloat16", "tied": "float32"}
    model = {
        "a": torch.zeros(1, dtype=torch.float64),
        "b": torch.zeros(1, dtype=torch.float64),
        "c": torch.zeros(1, dtype=torch.float32),
        "only_mine": torch.zeros(1, dtype=torch.float16),
    }
    assert changed_dtypes(saved, model) == {
        ("float32", "float64"): ["a", "b"],
        ("bfloat16", "float32"): ["c"],
    }
