"""The Navier–Stokes example's ``--model neuralop`` (`neuraloperator`'s FNO) with a fused
optimizer and with inductor. Its spectral weights are complex parameters, which a fused
Adam refuses; the example stores them as real (re, im) pairs (`models.real_parameters`),
as its own FNO does. Skipped where `neuraloperator` is not installed (an extra, not in
``[test]``: ``pip install "melissa-trainer[neuralop]"``)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

with warnings.catch_warnings():  # (neuralop imports wandb, which warns on import)
    warnings.simplefilter("ignore")
    neuralop = pytest.importorskip(
        "neuralop",
        reason='neuraloperator is an extra: pip install "melissa-trainer[neuralop]"',
    )

from navier_stokes import models  # noqa: E402 (after the skip)

pytestmark = pytest.mark.timeout(300)


def neuralops_own_fno() -> torch.nn.Module:
    """The package's FNO as `make_model("neuralop", 4, 8, 4, 2)` builds it, untouched."""
    torch.manual_seed(0)
    return neuralop.models.FNO(
        n_modes=(4, 4), hidden_channels=8, in_channels=4, out_channels=1, n_layers=2
    )


def test_the_example_stores_neuralops_complex_weights_as_real_pairs_of_the_same_numbers() -> None:
    own = neuralops_own_fno()
    assert any(p.is_complex() for p in own.parameters())  # what a fused optimizer refuses
    torch.manual_seed(0)
    ours = models.make_model("neuralop", 4, 8, 4, 2)
    assert all(p.is_floating_point() for p in ours.parameters())
    assert sum(p.numel() for p in ours.parameters()) == sum(
        p.numel() * (2 if p.is_complex() else 1) for p in own.parameters()
    )
    x = torch.randn(3, 4, 16, 16)
    torch.testing.assert_close(ours(x), own(x), rtol=0, atol=0)  # bit for bit
    assert not any("_metadata" in k for k in ours.state_dict())  # safetensors can hold it


def test_neuralops_fno_trains_with_a_fused_adam_as_with_adam_on_its_complex_weights() -> None:
    """A fused Adam on the example's model (it refused: "`fused=True` requires all the
    params to be floating point ... torch.complex64") takes the steps the default Adam
    takes on the package's own complex weights (the oracle)."""
    own = neuralops_own_fno()
    torch.manual_seed(0)
    ours = models.make_model("neuralop", 4, 8, 4, 2)
    optimizers = [
        torch.optim.Adam(own.parameters(), lr=1e-2),
        torch.optim.Adam(ours.parameters(), lr=1e-2, fused=True),
    ]
    x, y = torch.randn(3, 4, 16, 16), torch.randn(3, 1, 16, 16)
    losses: list[list[float]] = [[], []]
    for _ in range(3):
        for i, (model, optimizer) in enumerate(zip((own, ours), optimizers, strict=True)):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses[i].append(loss.item())
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    assert losses[1][-1] < losses[1][0]
    own_conv: Any = own.fno_blocks.convs[0]  # type: ignore[union-attr,index]
    ours_conv: Any = ours.model.fno_blocks.convs[0]
    own_weight, ours_weight = own_conv.weight.to_tensor(), ours_conv.weight.to_tensor()
    torch.testing.assert_close(ours_weight, own_weight, rtol=1e-5, atol=1e-6)


@pytest.mark.e2e  # inductor runs a C++ compiler
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_neuralops_fno_compiles_with_inductor() -> None:
    """`--torch_compile` on the example's neuralop model: its forward and backward give
    eager's output and gradients within float32 rounding."""
    torch.manual_seed(0)
    model = models.make_model("neuralop", 4, 8, 4, 2)
    x = torch.randn(3, 4, 16, 16)
    eager_out = model(x)
    eager_out.square().mean().backward()
    eager_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    compiled = torch.compile(model, backend="inductor")
    out = compiled(x)
    out.square().mean().backward()
    torch.testing.assert_close(out, eager_out, rtol=1e-4, atol=1e-5)
    for p, g in zip(model.parameters(), eager_grads, strict=True):
        torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-5)
