"""A run whose stream ended before `max_steps` says how to train on: a larger
`max_steps` cannot help (resuming a finished run with one trains nothing, which a
Hugging Face user expects to "train longer"), `--pseudo_epochs` replays the buffer,
also on resume. The oracle: the resumed runs' steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)
N = 400  # samples streamed: 50 steps of 8


def run(out: Path, **overrides: Any) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(out), report_to="none", disable_progress_bar=True, batch_size=8,
        buffer="reservoir", buffer_size=64, watermark=16, sample_to_insert_ratio=0,
        stop_sync_steps=1, seed=3, **overrides,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(N), process_sample=xy,
    )  # fmt: skip
    trainer.train()
    return trainer


def end_line(out: str) -> str:
    (line,) = [ln for ln in out.splitlines() if "each sample trained on" in ln]
    return line


def test_a_finished_run_resumed_with_a_larger_max_steps_says_how_to_train_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    ended = run(out).state.global_step  # to the stream's end: a checkpoint there
    assert "to train on" not in end_line(capsys.readouterr().out)  # no max_steps: no hint
    resumed = run(out, resume_from_checkpoint="latest", max_steps=1000)
    assert resumed.state.global_step == ended  # nothing trained: the stream had ended
    line = end_line(capsys.readouterr().out)
    assert "(end of stream, before max_steps 1000)" in line, line
    assert "--pseudo_epochs 2 or more replays the buffer (also on resume)" in line, line
    assert "a new study" in line, line
    # what the line says works: a replay on resume trains on
    replayed = run(out, resume_from_checkpoint="latest", max_steps=1000, pseudo_epochs=2)
    assert replayed.state.global_step > ended and replayed.state.pseudo_epoch == 1
