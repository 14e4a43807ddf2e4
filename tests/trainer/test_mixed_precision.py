"""bf16 autocast through Accelerate (``mixed_precision="bf16"``), on CPU: a real short
run whose forward passes run in bfloat16 while the weights stay float32."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import Recorder, linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.core.accelerated import PlainStep

pytestmark = pytest.mark.timeout(120)


def train(tmp_path: Path, precision: str) -> tuple[OnlineTrainer, Recorder, list[torch.dtype]]:
    args = TrainingArguments(
        output_dir=str(tmp_path / precision),
        batch_size=16,
        buffer="fifo",
        buffer_size=128,
        mixed_precision=precision,
        report_to="none",
        disable_progress_bar=True,
        save_at_end=False,
    )
    model = small_model(0)
    dtypes: list[torch.dtype] = []

    def record(module: torch.nn.Module, inputs: Any, output: torch.Tensor) -> None:
        dtypes.append(output.dtype)

    model[0].register_forward_hook(record)  # the first Linear: what autocast runs it in
    rec = Recorder()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(640)),
        process_sample=xy,
        hooks=[rec],
    )
    trainer.train()
    return trainer, rec, dtypes


def test_bf16_autocasts_the_forward_and_trains(tmp_path: Path) -> None:
    trainer, rec, dtypes = train(tmp_path, "bf16")
    assert isinstance(trainer._step, PlainStep)  # bf16 needs no grad scaler: the plain path
    assert trainer.state.global_step == 40
    assert len(dtypes) == 40 and set(dtypes) == {torch.bfloat16}
    assert all(math.isfinite(loss) for loss in rec.losses)
    assert sum(rec.losses[-5:]) < 0.5 * sum(rec.losses[:5])  # it learns
    weights = trainer.accelerator.unwrap_model(trainer.model).parameters()
    assert {p.dtype for p in weights} == {torch.float32}  # autocast, not a cast model


def test_without_mixed_precision_the_forward_is_float32(tmp_path: Path) -> None:
    # the contrast that makes the bf16 test able to fail
    _, _, dtypes = train(tmp_path, "no")
    assert dtypes and set(dtypes) == {torch.float32}


class LossUnderAutocast(OnlineTrainer):
    """Records whether the loss (outside the model's forward) runs under autocast."""

    seen: list[bool]

    def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        self.seen.append(torch.is_autocast_enabled(batch[0].device.type))
        return super().compute_loss(model, batch)


@pytest.mark.parametrize("precision", ["bf16", "no"])
def test_the_loss_runs_under_autocast_exactly_with_bf16(tmp_path: Path, precision: str) -> None:
    """A `compute_loss` with its own ops sees autocast under bf16, as Accelerate's path
    gives it (the model's forward alone would not show a missing context: Accelerate
    wraps it in autocast itself)."""
    args = TrainingArguments(
        output_dir=str(tmp_path), batch_size=16, buffer="fifo", buffer_size=128,
        mixed_precision=precision, report_to="none", disable_progress_bar=True,
        save_at_end=False, max_steps=3,
    )  # fmt: skip
    model = small_model(0)
    trainer = LossUnderAutocast(
        model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(128)), process_sample=xy,
    )  # fmt: skip
    trainer.seen = []
    trainer.train()
    assert trainer.seen == [precision == "bf16"] * 3


def test_fp16_on_a_cpu_is_refused_naming_bf16(tmp_path: Path) -> None:
    """Accelerate runs no fp16 autocast on a CPU: a run asked for fp16 there trained in
    float32 (its first Linear's outputs were float32) without a word (the user trial on
    the Navier–Stokes example). Refused when the trainer is made, before any output is
    written, naming the field and bf16."""
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=16, buffer="fifo", buffer_size=128,
        mixed_precision="fp16", report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    model = small_model(0)
    with pytest.raises(
        ValueError, match=r"mixed_precision='fp16' on cpu: .* set mixed_precision='bf16'"
    ):
        OnlineTrainer(
            model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
            train_source=list(linear_samples(128)), process_sample=xy,
        )  # fmt: skip
    assert not (tmp_path / "out").exists()
