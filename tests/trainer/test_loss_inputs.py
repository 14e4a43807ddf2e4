"""The default losses' inputs said in the library's words (trial 29, a Hugging Face
user training an FNO online; melissa_trainer/trainer/loss_inputs.py): a model returning
a dict or a tuple is refused before torch's `mse_loss` fails on it ("'dict' object has
no attribute 'size'"), naming the output's type and the fix (loss_fn= or compute_loss);
a dict batch from a user's collate_fn names collate_fn, not process_sample. A user's
loss_fn gets whatever the model returns. In-process source, one rank, a few steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from melissa_trainer import OnlineTrainer, TrainingArguments


def simulations(rank: int, world_size: int) -> Iterator[dict[str, Any]]:
    for sim in range(rank, 6, world_size):
        for t in range(10):
            field = np.full(16, sim / 6 * t / 10, np.float32)
            yield {"params": np.array([sim / 6], np.float32), "t": t, "field": field}


def process_sample(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.cat([torch.from_numpy(s["params"]), torch.tensor([float(s["t"])])])
    return x, torch.from_numpy(s["field"])


class Model(torch.nn.Module):
    def __init__(self, returns: str) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 16)
        self.returns = returns

    def forward(self, x: torch.Tensor) -> Any:
        y = self.linear(x)
        if self.returns == "dict":  # a transformers-style ModelOutput / dict
            return {"logits": y}
        if self.returns == "tuple":  # (prediction, hidden state), as many operators do
            return (y, x)
        return y


def args(tmp_path: Path) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path / "out"),
        buffer="fifo",
        batch_size=4,
        logging_steps=5,
        disable_progress_bar=True,
        report_to="none",
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("returns", ["dict", "tuple"])
def test_a_model_returning_a_dict_or_tuple_is_named(tmp_path: Path, returns: str) -> None:
    model = Model(returns)
    trainer = OnlineTrainer(
        model,
        args(tmp_path),
        torch.optim.Adam(model.parameters(), 1e-3),
        train_source=simulations,
        process_sample=process_sample,
    )
    with pytest.raises((TypeError, ValueError)) as raised:
        trainer.train()
    message = str(raised.value)
    assert returns in message, message  # names what the model returned
    assert "loss_fn" in message or "compute_loss" in message, message


@pytest.mark.timeout(120)
def test_a_dict_batch_from_collate_fn_names_collate_fn(tmp_path: Path) -> None:
    def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        xs, ys = zip(*items, strict=True)
        return {"x": torch.stack(xs), "y": torch.stack(ys)}

    model = Model("tensor")
    trainer = OnlineTrainer(
        model,
        args(tmp_path),
        torch.optim.Adam(model.parameters(), 1e-3),
        train_source=simulations,
        process_sample=process_sample,
        collate_fn=collate,
    )
    with pytest.raises(TypeError, match="collate_fn"):
        trainer.train()


@pytest.mark.timeout(120)
def test_a_users_loss_fn_gets_the_models_dict(tmp_path: Path) -> None:
    model = Model("dict")
    trainer = OnlineTrainer(
        model,
        args(tmp_path),
        torch.optim.Adam(model.parameters(), 1e-3),
        train_source=simulations,
        process_sample=process_sample,
        loss_fn=lambda outputs, targets: torch.nn.functional.mse_loss(outputs["logits"], targets),
    )
    assert trainer.train().global_step > 0


@pytest.mark.timeout(120)
def test_a_dict_batch_of_the_default_collate_names_process_sample(tmp_path: Path) -> None:
    model = Model("tensor")
    trainer = OnlineTrainer(
        model,
        args(tmp_path),
        torch.optim.Adam(model.parameters(), 1e-3),
        train_source=simulations,
    )
    with pytest.raises(TypeError) as raised:
        trainer.train()
    message = str(raised.value)
    assert "dict with keys" in message and "process_sample" in message, message
    assert "collate_fn" not in message, message
