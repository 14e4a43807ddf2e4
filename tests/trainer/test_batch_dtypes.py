"""A batch of another dtype than the model's, said in the library's words
(melissa_trainer/trainer/batch_dtypes.py): a user trial's `process_sample` returned a
float64 tensor, and training failed with torch's "mat1 and mat2 must have the same
dtype, but got Double and Float", with no word of `process_sample`. Now the first step's
error names the function, the batch's part, both dtypes and the fix, chained from
torch's. What runs with another dtype (float64 targets the loss promotes, a float64
model) still trains. In-process source, one rank, a few steps (test_loss_inputs's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_loss_inputs import Model, args, simulations

from melissa_trainer import OnlineTrainer
from melissa_trainer.trainer.batch_dtypes import checked_first_backward, dtype_mismatches


def float64_inputs(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    # the trial's: torch.tensor of a NumPy array's float64 values, no dtype given
    params = s["params"].astype(np.float64)
    return torch.tensor([*params, float(s["t"])]), torch.from_numpy(s["field"])


def float64_targets(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.tensor([float(s["params"][0]), float(s["t"])], dtype=torch.float32)
    return x, torch.from_numpy(s["field"].astype(np.float64))


def trainer(tmp_path: Path, model: torch.nn.Module, **kw: Any) -> OnlineTrainer:
    return OnlineTrainer(
        model,
        args(tmp_path),
        torch.optim.Adam(model.parameters(), 1e-3),
        train_source=simulations,
        **kw,
    )


@pytest.mark.timeout(120)
def test_a_float64_process_sample_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as raised:
        trainer(tmp_path, Model("tensor"), process_sample=float64_inputs).train()
    message = str(raised.value)
    assert message.startswith(
        "process_sample made a batch whose batch[0] is torch.float64, but the model's "
        "parameters are torch.float32: return torch.float32 tensors from process_sample "
        "(torch.tensor(..., dtype=torch.float32), or .float() on a tensor"
    ), message
    assert "Torch said: mat1 and mat2 must have the same dtype" in message
    assert isinstance(raised.value.__cause__, RuntimeError)  # torch's, kept


@pytest.mark.timeout(120)
def test_a_dict_from_collate_fn_names_collate_fn_and_the_key(tmp_path: Path) -> None:
    def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        xs, ys = zip(*items, strict=True)
        return {"x": torch.stack(xs), "y": torch.stack(ys)}

    class DictModel(Model):
        def forward(self, x: Any) -> Any:
            return super().forward(x["x"])

    def loss(outputs: torch.Tensor, targets: Any) -> torch.Tensor:
        return torch.nn.functional.mse_loss(outputs, targets["y"])

    class Trainer(OnlineTrainer):
        def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
            return loss(model(batch), batch)

    model = DictModel("tensor")
    with pytest.raises(RuntimeError, match=r"^collate_fn made a batch whose batch\['x'\] is "):
        Trainer(
            model,
            args(tmp_path),
            torch.optim.Adam(model.parameters(), 1e-3),
            train_source=simulations,
            process_sample=float64_inputs,
            collate_fn=collate,
        ).train()


@pytest.mark.timeout(120)
def test_what_runs_with_another_dtype_still_trains(tmp_path: Path) -> None:
    # float64 targets: mse_loss promotes them (a float64 loss); no refusal
    done = trainer(tmp_path / "a", Model("tensor"), process_sample=float64_targets).train()
    assert done.global_step == 15
    # a float64 model of float64 batches: the dtypes agree
    done = trainer(tmp_path / "b", Model("tensor").double(), process_sample=float64_inputs).train()
    assert done.global_step == 15


def test_the_mismatches_are_read_from_every_part() -> None:
    f32, f64 = torch.zeros(2), torch.zeros(2, dtype=torch.float64)
    batch = {"x": f64, "n": torch.zeros(2, dtype=torch.int64), "pair": (f32, [f64])}
    assert dtype_mismatches(batch, torch.float32) == [
        "batch['x'] is torch.float64",
        "batch['pair'][1][0] is torch.float64",
    ]
    assert dtype_mismatches((f32, f32), torch.float32) == []


def test_another_failure_of_the_first_step_is_left_as_it_is() -> None:
    failure = RuntimeError("CUDA out of memory")
    model = torch.nn.Linear(2, 2)

    def backward(batch: Any) -> torch.Tensor:
        raise failure

    batch = (torch.zeros(1, 2, dtype=torch.float64),) * 2
    with pytest.raises(RuntimeError) as raised:
        checked_first_backward(backward, batch, model, None)  # type: ignore[arg-type]
    assert raised.value is failure
