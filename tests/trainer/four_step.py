"""The 4-step trainer that the tests of `OnlineTrainer.train_ended` build
(`test_train_close_ended.py`, `test_failed_start_ended.py`): a small linear model fed
100 in-process samples, batches of 4, ``max_steps=4``, no reporting, so that an
undisturbed train() ends at step 4 within a second."""

from __future__ import annotations

from pathlib import Path

import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments


def four_step_trainer(out: Path) -> OnlineTrainer:
    """A fresh trainer writing to `out` whose train() runs 4 steps of SGD (lr 1e-2) on
    `linear_samples(100)`, with the stop check every 2 steps."""
    model = small_model()
    args = TrainingArguments(
        output_dir=str(out), batch_size=4, max_steps=4, stop_sync_steps=2,
        report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    return OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), 1e-2),
        train_source=lambda rank, world: linear_samples(100), process_sample=xy,
    )  # fmt: skip
