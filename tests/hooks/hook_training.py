"""The small run the hook tests train (`train`): a linear model on a FIFO stream of `n` samples,
its arguments overridable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments


def train(
    tmp_path: Path,
    n: int = 160,
    hooks=(),
    eval_dataset=None,
    use_default_hooks: bool = True,
    **overrides: Any,
):
    options: dict[str, Any] = dict(  # FIFO: each sample once, the step counts rely on it
        output_dir=str(tmp_path / "out"),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        logging_steps=5,
    )
    args = TrainingArguments(**{**options, "save_at_end": False, **overrides})
    model = small_model()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(n)),
        process_sample=xy,
        hooks=hooks,
        eval_dataset=eval_dataset,
        use_default_hooks=use_default_hooks,
    )
    trainer.train()
    return trainer
