"""The tiny one-process trainer that the tests' training scripts build around a hook of
their own (tests/scripts/late_signal.py, last_window_signal.py, late_signal_then_fail.py,
last_window_asked_save.py, train_tiny.py): ``small_model(0)`` trained by SGD (lr 0.05) on
64 samples of a linear map (`linear_samples`), one thread. Not the resume tests' run
(tests/tiny_resume.py: Adam on a streamed source, compared across resumes)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

__all__ = ["tiny_arguments", "tiny_trainer"]


def tiny_arguments(out: Path, **overrides: Any) -> TrainingArguments:
    """The scripts' `TrainingArguments`: `output_dir` `out`, 4 steps, no reports and no
    progress bar, with `overrides` (``stop_sync_steps=``, ``save_at_end=``, ...) on top."""
    settings: dict[str, Any] = {
        "output_dir": str(out),
        "max_steps": 4,
        "report_to": "none",
        "disable_progress_bar": True,
        **overrides,
    }
    return TrainingArguments(**settings)


def tiny_trainer(args: TrainingArguments, hooks: Iterable[Hook] = ()) -> OnlineTrainer:
    """The tiny trainer with `args` and `hooks`, not yet trained: torch on one thread
    (the scripts run beside other tests), ``small_model(0)`` and its SGD optimizer, the
    64 samples given as a list."""
    torch.set_num_threads(1)
    model = small_model(0)
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.05),
        train_source=list(linear_samples(64)),
        process_sample=xy,
        hooks=list(hooks),
    )
