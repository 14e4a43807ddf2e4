"""The logged `buffer_put` / `buffer_got` are totals since the run began, kept across a
resume (docs/concepts/loop.md, "What a log holds"), not counts since the last log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(60)


def run(out: Path, **over: Any) -> list[dict[str, float]]:
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=4,
        buffer="fifo",  # each sample drawn once: put and got are known
        buffer_size=8,
        watermark=1,
        logging_steps=2,
        save_steps=4,
        report_to="none",
        disable_progress_bar=True,
        stop_sync_steps=2,
        **over,
    )
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(40, 0)),
        process_sample=xy,
    )
    trainer.train()
    return [e for e in trainer.state.log_history if "buffer_got" in e]


def test_buffer_put_and_got_are_totals_across_logs_and_a_resume(tmp_path: Path) -> None:
    logs = run(tmp_path / "out", max_steps=6)
    assert [(e["step"], e["buffer_got"]) for e in logs] == [(2, 8), (4, 16), (6, 24)]
    assert all(e["buffer_put"] >= e["buffer_got"] for e in logs)
    resumed = run(tmp_path / "out", max_steps=10, resume_from_checkpoint="latest")
    # the resumed run's logs (its history also holds the checkpoint's) go on counting
    assert [(e["step"], e["buffer_got"]) for e in resumed if e["step"] > 6] == [(8, 32), (10, 40)]
