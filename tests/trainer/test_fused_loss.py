"""The tracked step's fast paths (issue 46, eighth round) against the plain ones:

* `fused_mse_loss`: the step's loss and the per-sample losses from one elementwise
  operator, against ``mse_loss(outputs, targets)`` (value and gradient, bit for bit) and
  ``mse_loss(..., reduction="none")``;
* the loop handing the per-sample losses to the trackers' `SimulationLosses.record`
  without firing SAMPLE_LOSSES, against the event (a listening user hook).

Bit for bit: a tracked run must train the same weights as an untracked one, and the
sampler is steered by these numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from accelerate import Accelerator

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.core import sample_losses
from melissa_trainer.core.accelerated import unit_loss_gradient
from melissa_trainer.core.sample_losses import (
    FUSED_MAX_ELEMENTS,
    DeferredSampleLosses,
    fused_mse_loss,
    sample_losses_of,
    step_sample_losses,
)
from melissa_trainer.hooks.base import HookList


def gradients(loss: torch.Tensor, params: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss, params))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(32, 256), (7, 3, 5), (9,), (1, 1), (33, 129), (5, 4097)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_fused_loss_is_mse_loss_bit_for_bit_value_and_gradient(
    threads: int, shape: Any, dtype: Any
) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for scale in (1e-3, 1.0, 1e3):  # rounding shows at every magnitude
            torch.manual_seed(len(shape) + int(scale))
            inputs = torch.randn(shape[0], 6, dtype=dtype)
            layer = torch.nn.Linear(6, int(np.prod(shape[1:])), dtype=dtype)
            params = list(layer.parameters())
            targets = torch.randn(shape, dtype=dtype) * scale

            def outputs(layer: Any = layer, inputs: Any = inputs, scale: Any = scale) -> Any:
                return (layer(inputs) * scale).reshape(shape)

            want = F.mse_loss(outputs(), targets)
            want_grads = gradients(want, params)
            fused = fused_mse_loss(F.mse_loss, outputs(), targets)
            assert fused is not None
            loss, elementwise = fused
            assert loss.dtype == dtype and loss.shape == () and torch.equal(loss, want)
            for got, expected in zip(gradients(loss, params), want_grads, strict=True):
                assert torch.equal(got, expected)
            assert elementwise.grad_fn is None and not elementwise.requires_grad
            plain = F.mse_loss(outputs().detach(), targets, reduction="none")
            assert torch.equal(elementwise, plain)
            # the per-sample losses: those of the step's own shortcut
            mine = sample_losses_of(elementwise, defer=False)
            assert torch.equal(mine, step_sample_losses(F.mse_loss, outputs(), targets))
    finally:
        torch.set_num_threads(before)


def test_the_fused_loss_of_strided_outputs_is_mse_loss_bit_for_bit() -> None:
    torch.manual_seed(3)
    weight = torch.randn(40, 24, requires_grad=True)
    targets = torch.randn(24, 40).t()  # strided both
    want = F.mse_loss(weight.t().t() * 2.0, targets)
    fused = fused_mse_loss(F.mse_loss, weight * 2.0, targets)
    assert fused is not None and torch.equal(fused[0], want)
    (want_grad,) = torch.autograd.grad(want, [weight])
    (got_grad,) = torch.autograd.grad(fused[0], [weight])
    assert torch.equal(got_grad, want_grad)


def test_the_gradients_factor_is_twice_float32s_reciprocal_up_to_the_bound() -> None:
    # mse_loss's backward (reduction mean) multiplies by 2 / n computed in float64 and
    # rounded to the outputs' float32; the fused loss's backward divides 1 by n in float32,
    # then multiplies 2 * (output - target), an exact doubling, by it: the same product
    # for every n where float32(2 / n) == 2 * float32(1 / n), which is every n up to the
    # bound (float64: the doubling of a rounded 1 / n is the rounded 2 / n, always)
    step = 2**21
    for start in range(1, FUSED_MAX_ELEMENTS + 1, step):
        n = np.arange(start, min(start + step, FUSED_MAX_ELEMENTS + 1), dtype=np.int64)
        mean_factor = (2.0 / n.astype(np.float64)).astype(np.float32)
        fused_factor = np.float32(2) * (np.float32(1) / n.astype(np.float32))
        assert np.array_equal(mean_factor, fused_factor), n[mean_factor != fused_factor][:5]


def test_the_fused_loss_declines_what_it_is_not_checked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outputs = torch.randn(6, 4, requires_grad=True) * 2
    targets = torch.randn(6, 4)
    declined = [
        (F.l1_loss, outputs, targets),  # another loss
        (F.mse_loss, outputs, torch.randn(6, 1)),  # broadcast targets
        (F.mse_loss, outputs.bfloat16(), targets.bfloat16()),  # mean sums bf16 in float
        (F.mse_loss, outputs, targets.double()),  # mixed dtypes (promoted)
        (F.mse_loss, outputs, targets.clone().requires_grad_()),  # targets with a gradient
        (F.mse_loss, outputs[:0], targets[:0]),  # no elements (a nan mean)
        (F.mse_loss, outputs.to("meta"), targets.to("meta")),  # not on the CPU
        (F.mse_loss, torch.nn.Parameter(outputs.detach()), targets),  # a tensor subclass
    ]
    for loss_fn, o, t in declined:
        assert fused_mse_loss(loss_fn, o, t) is None
    assert fused_mse_loss(F.mse_loss, outputs, targets) is not None
    monkeypatch.setattr(sample_losses, "FUSED_MAX_ELEMENTS", 23)
    assert fused_mse_loss(F.mse_loss, outputs, targets) is None  # 24 elements: beyond


def test_only_a_backward_seeded_with_one_fuses() -> None:
    assert unit_loss_gradient(Accelerator(cpu=True))
    assert not unit_loss_gradient(Accelerator(cpu=True, gradient_accumulation_steps=2))


def data(n: int = 96) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    return [{"x": rng.standard_normal(5).astype(np.float32),
             "y": rng.standard_normal(37).astype(np.float32),
             "simulation_id": np.array(i % 6, np.int64)} for i in range(n)]  # fmt: skip


def xy(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(sample["x"]), torch.from_numpy(sample["y"])


def trainer(where: Path, steps: int, accumulation: int = 1, hooks: Any = ()) -> OnlineTrainer:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 37))
    args = TrainingArguments(output_dir=str(where), batch_size=8, buffer="fifo",
                             buffer_size=32, report_to="none", disable_progress_bar=True,
                             simulation_loss_steps=steps, save_at_end=False,
                             gradient_accumulation_steps=accumulation)  # fmt: skip
    return OnlineTrainer(model, args, torch.optim.Adam(model.parameters(), lr=0.01),
                         train_source=iter(data()), process_sample=xy,
                         hooks=list(hooks))  # fmt: skip


@pytest.mark.parametrize("accumulation", [1, 2, 3])
def test_a_tracked_run_fuses_where_it_may_and_trains_as_an_untracked_one(
    tmp_path: Path, accumulation: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from melissa_trainer.trainer import losses

    fused: list[bool] = []

    def spy(*args: Any) -> Any:
        got = fused_mse_loss(*args)
        fused.append(got is not None)
        return got

    monkeypatch.setattr(losses, "fused_mse_loss", spy)
    untracked = trainer(tmp_path / "a", 0, accumulation)
    untracked.train()
    tracked = trainer(tmp_path / "b", 2, accumulation)
    tracked.train()
    # accumulated: the loss is divided before backward (the gradient's seed is not 1)
    assert fused == ([True] * 12 if accumulation == 1 else [])
    assert len(tracked.simulation_losses) == 6
    for a, b in zip(untracked.model.parameters(), tracked.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_the_trackers_alone_get_the_losses_without_the_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired: list[str] = []
    original = HookList.fire

    def spy(self: HookList, event: Any, *args: Any) -> None:
        fired.append(event.value)
        original(self, event, *args)

    monkeypatch.setattr(HookList, "fire", spy)

    class Listener(Hook):
        def __init__(self) -> None:
            self.calls = 0

        def on_sample_losses(self, trainer: Any, state: Any, control: Any, losses: Any,
                             simulation_ids: Any) -> None:  # fmt: skip
            assert isinstance(losses, torch.Tensor) and len(losses) == len(simulation_ids)
            self.calls += 1

    alone = trainer(tmp_path / "a", 2)
    alone.train()
    assert "on_sample_losses" not in fired and "on_simulation_losses" in fired
    fired.clear()
    listener = Listener()
    heard = trainer(tmp_path / "b", 2, hooks=[listener])
    heard.train()
    assert fired.count("on_sample_losses") == 12 == listener.calls
    # the same statistics either way (deferred to the tracker, or computed for the event)
    assert list(alone.simulation_losses.items()) == list(heard.simulation_losses.items())
    assert len(alone.simulation_losses) == 6


def test_a_deferred_fused_loss_is_kept_for_the_period() -> None:
    outputs = torch.randn(4, 3, requires_grad=True) * 2
    targets = torch.randn(4, 3)
    fused = fused_mse_loss(F.mse_loss, outputs, targets)
    assert fused is not None
    deferred = sample_losses_of(fused[1], defer=True)
    assert isinstance(deferred, DeferredSampleLosses)
    assert torch.equal(
        sample_losses.losses_of([deferred]), step_sample_losses(F.mse_loss, outputs, targets)
    )
