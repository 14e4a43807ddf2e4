"""`OnlineTrainer` stores a host reservoir by column when it reads batches as blocks,
and trains exactly as on the plain reservoir (the oracle: the same run with
`make_buffer`'s plain store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

import melissa_trainer.trainer.setup as trainer_setup
from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.buffers import ColumnarReservoirBuffer, ReservoirBuffer, make_buffer

pytestmark = pytest.mark.timeout(60)


def _args(out: Path) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="reservoir",
        buffer_size=64,
        watermark=16,
        max_steps=60,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
    )


def _batch(block: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.as_tensor(block.fields["x"]), torch.as_tensor(block.fields["y"])


def _train(out: Path, **kwargs: Any) -> OnlineTrainer:
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    trainer = OnlineTrainer(
        model, _args(out), optimizer, train_source=linear_samples(400), **kwargs
    )
    trainer.train()
    return trainer


def test_blocks_read_a_columnar_reservoir_that_trains_as_the_plain_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    columnar = _train(tmp_path / "a", process_batch=_batch)
    assert type(columnar.buffer) is ColumnarReservoirBuffer and columnar.buffer.columnar
    monkeypatch.setattr(
        trainer_setup, "make_buffer", lambda config, columnar=False: make_buffer(config)
    )
    plain = _train(tmp_path / "b", process_batch=_batch)
    assert type(plain.buffer) is ReservoirBuffer
    assert columnar.state.global_step == plain.state.global_step == 60
    for a, b in zip(columnar.model.parameters(), plain.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert columnar.buffer.stats() == plain.buffer.stats()


def test_a_per_sample_function_keeps_the_plain_reservoir(tmp_path: Path) -> None:
    trainer = _train(tmp_path, process_sample=xy)
    assert type(trainer.buffer) is ReservoirBuffer
