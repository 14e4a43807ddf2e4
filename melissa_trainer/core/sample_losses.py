"""The per-sample losses of a micro-batch: how the trainer computes them when a hook
asks (the SAMPLE_LOSSES event; from the step's own outputs, one forward pass),
and the refusal of a trainer class whose own loss would be bypassed.

Cost (issue 46: they are computed on every step of an adaptive study): for the default
loss (`torch.nn.functional.mse_loss`, outputs and targets of one shape) the elementwise
loss is the very ATen operator `mse_loss` calls, without its Python checks and without
a `torch.no_grad` block (nothing there requires a gradient): about half the CPU of the
generic path on a small MLP's step (docs/measured.md), the same values bit for bit.

Deferred (`DeferredSampleLosses`, `deferred_sample_losses`): on the CPU, the mean per
sample of the default loss's elementwise losses need not be taken at each step. The step
computes the elementwise losses (one operator, while its outputs are in cache) and keeps
them; `losses_of` averages those of many steps at once, one concatenation and one mean
over all their rows: the same values bit for bit (each row's mean is the same reduction
whatever the rows around it; tested, several dtypes and thread counts; contiguous
results only). On a busy CPU the mean (a sum and a division) was most of the per-sample
losses' cost, paid in cold caches at every step (issue 46, docs/measured.md's sixth
round). Not on other devices: a GPU's reduction kernels may split rows differently by
the number of rows (not tested bit for bit there: the mean is taken per step).

Nothing here knows what the losses are for: the `SimulationLossTracker` hook sums them
per simulation (`melissa_trainer.core.loss_per_simulation`), a user hook may do anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "DeferredSampleLosses",
    "check_loss_overrides",
    "deferred_sample_losses",
    "losses_of",
    "per_sample_losses",
    "step_sample_losses",
]

#: the ATen operator `torch.nn.functional.mse_loss` ends in (after checks that cannot fail
#: for plain tensors of one shape), and ATen's code of reduction="none" (Reduction::None;
#: a test checks the operator gives the functional's values)
_MSE_OPERATOR: Any = getattr(getattr(torch.ops.aten, "mse_loss", None), "default", None)
_NO_REDUCTION = 0


def check_loss_overrides(trainer_type: type, base: type) -> None:
    """Refuse a trainer class that overrides `compute_loss` but not
    `compute_sample_losses`, when a hook asks for the per-sample losses (SAMPLE_LOSSES):
    the step then trains on the mean of the latter, not on the loss its author wrote.

    Raises:
        TypeError: naming the fixes.
    """
    if (
        trainer_type.compute_loss is not base.compute_loss  # type: ignore[attr-defined]
        and trainer_type.compute_sample_losses  # type: ignore[attr-defined]
        is base.compute_sample_losses  # type: ignore[attr-defined]
    ):
        raise TypeError(
            f"{trainer_type.__name__} overrides compute_loss, but a hook asks for the "
            "per-sample losses (on_sample_losses; per-simulation losses: "
            "simulation_loss_steps, on for an adaptive sampler), and the step then trains "
            "on the mean of compute_sample_losses: override compute_sample_losses too (one "
            "loss per sample), or set simulation_loss_steps=0 with a fixed design"
        )


def per_sample_losses(loss_fn: Any, outputs: Any, targets: Any) -> torch.Tensor:
    """``loss_fn(outputs, targets, reduction="none")`` averaged over every dimension but
    the first: one loss per sample, whose mean is ``loss_fn(outputs, targets)`` for a
    mean-reduced loss (mean squared error, L1...), up to rounding.

    Raises:
        TypeError: `loss_fn` takes no `reduction` (the message names the fixes).
    """
    try:
        losses = loss_fn(outputs, targets, reduction="none")
    except TypeError as exc:
        name = getattr(loss_fn, "__name__", repr(loss_fn))
        raise TypeError(
            f"per-simulation losses call loss_fn(outputs, targets, reduction='none'), which "
            f"{name} does not take ({exc}): pass a loss_fn that does (torch.nn.functional's "
            f"losses do), or override OnlineTrainer.compute_sample_losses"
        ) from exc
    return _per_sample_means(losses)


def step_sample_losses(loss_fn: Any, outputs: torch.Tensor, targets: Any) -> torch.Tensor:
    """`per_sample_losses` of a step's `outputs` (which carry the step's autograd graph)
    as values only: detached, no backward node, the step's own loss untouched.

    For ``torch.nn.functional.mse_loss`` on plain tensors of one shape, targets without
    a gradient (the default loss and batches): its ATen operator directly (what it calls
    after its checks, which cannot fail then), with no ``torch.no_grad`` block (no input
    requires a gradient: no graph is recorded). Otherwise `per_sample_losses` under
    ``torch.no_grad`` (a `loss_fn` with parameters records nothing either). The same
    values either way, bit for bit (a test compares them).

    Raises:
        TypeError: as `per_sample_losses`.
    """
    detached = outputs.detach()
    if _is_plain_mse(loss_fn, detached, targets):
        return _per_sample_means(_MSE_OPERATOR(detached, targets, _NO_REDUCTION))
    with torch.no_grad():
        return per_sample_losses(loss_fn, detached, targets)


def _is_plain_mse(loss_fn: Any, detached: torch.Tensor, targets: Any) -> bool:
    """`step_sample_losses`' shortcut applies: the default loss on plain tensors of one
    shape, targets without a gradient."""
    return (
        loss_fn is torch.nn.functional.mse_loss
        and _MSE_OPERATOR is not None
        and type(detached) is torch.Tensor
        and type(targets) is torch.Tensor
        and not targets.requires_grad
        and detached.shape == targets.shape
    )


class DeferredSampleLosses:
    """One micro-batch's per-sample losses under the default loss, their mean per sample
    not taken yet: the elementwise losses (``[n, ...]``, contiguous, on the CPU: a
    tensor of their own, which nothing else holds), which `losses_of` averages per
    sample with those of other micro-batches.

    Attributes:
        elementwise: the elementwise losses.
    """

    __slots__ = ("elementwise",)

    def __init__(self, elementwise: torch.Tensor) -> None:
        self.elementwise = elementwise

    @property
    def rows(self) -> int:
        """The number of samples."""
        return int(self.elementwise.shape[0])

    @property
    def nbytes(self) -> int:
        """The bytes held."""
        return int(self.elementwise.nbytes)


def deferred_sample_losses(
    loss_fn: Any, outputs: torch.Tensor, targets: Any
) -> torch.Tensor | DeferredSampleLosses:
    """`step_sample_losses`, with the mean per sample deferred (`DeferredSampleLosses`)
    where `losses_of` gives the same values bit for bit: the default loss's shortcut, on
    the CPU, samples of at least one value each, a contiguous result; computed now
    otherwise.

    Raises:
        TypeError: as `per_sample_losses`.
    """
    detached = outputs.detach()
    if not _is_plain_mse(loss_fn, detached, targets):
        with torch.no_grad():
            return per_sample_losses(loss_fn, detached, targets)
    elementwise = _MSE_OPERATOR(detached, targets, _NO_REDUCTION)
    # (one row a sample already: nothing to average; a strided layout, which the mean
    # might reduce in another order, or another device: the mean now)
    if elementwise.dim() > 1 and elementwise.is_cpu and elementwise.is_contiguous():
        return DeferredSampleLosses(elementwise)
    return _per_sample_means(elementwise)


def losses_of(deferred: Sequence[DeferredSampleLosses]) -> torch.Tensor:
    """The per-sample losses of `deferred` micro-batches, concatenated in their order:
    those of `step_sample_losses` on each, bit for bit. One concatenation and one mean
    per run of micro-batches of one dtype and sample shape (usually one run)."""
    if not deferred:
        return torch.zeros(0)
    keys = [(d.elementwise.dtype, d.elementwise.shape[1:]) for d in deferred]
    parts: list[torch.Tensor] = []
    start = 0
    for end in range(1, len(deferred) + 1):
        if end < len(deferred) and keys[end] == keys[start]:
            continue
        run = deferred[start:end]
        losses = run[0].elementwise if len(run) == 1 else torch.cat([d.elementwise for d in run])
        parts.append(_per_sample_means(losses))
        start = end
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _per_sample_means(losses: torch.Tensor) -> torch.Tensor:
    """`losses` (elementwise, first dimension the samples) averaged per sample."""
    dims = losses.dim()
    if dims == 2:  # (the reshape below would be the identity: one op fewer per step)
        return losses.mean(dim=1)
    return losses.reshape(losses.shape[0], -1).mean(dim=1) if dims > 1 else losses
