"""The tiny one-process run the resume tests train, resume and compare (the tests of
tests/checkpoint/test_resume_changes.py, test_resume_seed.py, test_resume_best_metric.py,
test_resume_model_dtype.py): a small model on 200 samples of a linear map, in
`output_dir` `out`, with `overrides` of its `TrainingArguments`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments

__all__ = ["said", "tiny_run"]


def tiny_run(
    out: Path,
    *,
    model: torch.nn.Module | None = None,
    process_sample: Callable[[Any], Any] = xy,
    trainer_kwargs: dict[str, Any] | None = None,
    **overrides: Any,
) -> OnlineTrainer:
    """Train (or resume, with ``resume_from_checkpoint=``) the tiny run to its end and
    return its trainer; `model` defaults to ``small_model(0)``, `trainer_kwargs` are
    more of `OnlineTrainer`'s (``hooks=``, ``eval_dataset=``)."""
    settings: dict[str, Any] = {
        "output_dir": str(out),
        "batch_size": 8,
        "buffer": "fifo",
        "buffer_size": 32,
        "watermark": 16,
        "report_to": "none",
        "disable_progress_bar": True,
        **overrides,
    }
    model = small_model(0) if model is None else model
    trainer = OnlineTrainer(
        model,
        TrainingArguments(**settings),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(200, seed=3),
        process_sample=process_sample,
        **(trainer_kwargs or {}),
    )
    trainer.train()
    return trainer


def said(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    """The messages logged (as `caplog` holds them) that contain `words`."""
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]
