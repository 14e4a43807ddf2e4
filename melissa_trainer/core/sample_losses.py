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

Fused (`fused_mse_loss`, issue 46's eighth round): where the step's backward seeds its
loss with a gradient of exactly 1 (no accumulation division, no loss scaling: the trainer
says so), the default loss's step computes the elementwise losses once, with autograd, and
derives both from them: the step's loss is their sum divided by their number, which is what
``mse_loss(outputs, targets)`` computes (ATen's ``mse_loss`` with reduction mean: the same
elementwise operator into a temporary, then ``mean``, on the CPU a sum and a division), and
its gradient is the same bits too (mean's backward multiplies by ``2 / n``, rounded from
float64; here ``2 * d`` times float's ``1 / n``: the same value for every n up to 2**24,
checked exhaustively by a test, and float64's alike); the per-sample losses are their
detached rows. One elementwise operator a step instead of two. On the CPU, for float32 and
float64 outputs and targets of one shape; elsewhere the paths above.

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
    "check_output_shape",
    "deferred_sample_losses",
    "fused_mse_loss",
    "losses_of",
    "per_sample_losses",
    "sample_losses_of",
    "step_sample_losses",
]

#: the ATen operator `torch.nn.functional.mse_loss` ends in (after checks that cannot fail
#: for plain tensors of one shape), and ATen's code of reduction="none" (Reduction::None;
#: a test checks the operator gives the functional's values)
_MSE_OPERATOR: Any = getattr(getattr(torch.ops.aten, "mse_loss", None), "default", None)
_NO_REDUCTION = 0
#: the most elements of a micro-batch's outputs `fused_mse_loss` takes: the range where its
#: gradient is checked equal to mean's (module docstring), and where float32 holds the count
FUSED_MAX_ELEMENTS = 2**24
_FUSED_DTYPES = (torch.float32, torch.float64)


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


#: torch's elementwise losses that broadcast outputs and targets of different shapes
#: with only a warning ("This will likely lead to incorrect results due to broadcasting")
_BROADCASTING_LOSSES: tuple[Any, ...] = (
    torch.nn.functional.mse_loss,
    torch.nn.functional.l1_loss,
    torch.nn.functional.smooth_l1_loss,
    torch.nn.functional.huber_loss,
)
_BROADCASTING_LOSS_MODULES = (
    torch.nn.MSELoss,
    torch.nn.L1Loss,
    torch.nn.SmoothL1Loss,
    torch.nn.HuberLoss,
)


def check_output_shape(loss_fn: Any, outputs: Any, targets: Any) -> None:
    """Refuse outputs and targets of different shapes under one of torch's elementwise
    losses (the default, `mse_loss`; `l1_loss`, `smooth_l1_loss`, `huber_loss`, or
    their modules): torch broadcasts them against each other with only a warning, and a
    model returning ``(batch, n, n)`` for targets ``(batch, 1, n, n)`` then trains on
    the distance of every output to every target of the batch, without an error.
    Anything else (another `loss_fn`, which may broadcast on purpose; outputs that are
    not plain tensors) passes.

    Raises:
        ValueError: naming both shapes and the fixes.
    """
    if not (
        isinstance(outputs, torch.Tensor)
        and isinstance(targets, torch.Tensor)
        and outputs.shape != targets.shape
        and (loss_fn in _BROADCASTING_LOSSES or isinstance(loss_fn, _BROADCASTING_LOSS_MODULES))
    ):
        return
    name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
    same_size = outputs.numel() == targets.numel()
    hint = (
        " (the same number of values: a dimension of size 1 missing or extra, e.g. "
        "outputs[:, None] or outputs.squeeze(1), or outputs.view_as(targets))"
        if same_size
        else ""
    )
    raise ValueError(
        f"the model's outputs have shape {tuple(outputs.shape)} and the targets "
        f"{tuple(targets.shape)}: loss_fn {name} would broadcast one against the other "
        "(torch only warns) and train on a wrong loss. Make the model return the "
        f"targets' shape{hint}, or make the targets the model's (process_sample or "
        "process_batch), or pass a loss_fn that takes both shapes"
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
    return sample_losses_of(_MSE_OPERATOR(detached, targets, _NO_REDUCTION), defer=True)


def sample_losses_of(elementwise: torch.Tensor, defer: bool) -> torch.Tensor | DeferredSampleLosses:
    """The per-sample losses of the default loss's `elementwise` losses (detached; first
    dimension the samples): their mean per sample, or with `defer` that mean deferred
    (`DeferredSampleLosses`) where `losses_of` gives the same bits: on the CPU, samples of
    at least one value each, a contiguous tensor."""
    # (one row a sample already: nothing to average; a strided layout, which the mean
    # might reduce in another order, or another device: the mean now)
    if defer and elementwise.dim() > 1 and elementwise.is_cpu and elementwise.is_contiguous():
        return DeferredSampleLosses(elementwise)
    return _per_sample_means(elementwise)


def fused_mse_loss(
    loss_fn: Any, outputs: torch.Tensor, targets: Any
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A step's loss ``loss_fn(outputs, targets)`` and its elementwise losses (detached)
    from one elementwise operator (module docstring), or None where that is not
    established: a loss other than the default one, other tensors than plain CPU ones of
    one shape and one dtype (float32 or float64), targets that require a gradient, no
    elements or more than `FUSED_MAX_ELEMENTS`.

    The loss is the same bits as ``loss_fn(outputs, targets)``, and so is its gradient
    when its backward is seeded with exactly 1 (``loss.backward()``; not divided for
    gradient accumulation, not scaled): the caller's condition (the trainer's
    `TrainerLosses._choose_loss`). Outputs and targets equal in magnitude beyond float's
    range aside (a difference above 2**127, whose squared loss is infinite already).
    """
    if (
        loss_fn is not torch.nn.functional.mse_loss
        or _MSE_OPERATOR is None
        or type(outputs) is not torch.Tensor
        or type(targets) is not torch.Tensor
        or targets.requires_grad
        or outputs.dtype not in _FUSED_DTYPES
        or targets.dtype != outputs.dtype
        or not outputs.is_cpu
        or not targets.is_cpu
        or outputs.shape != targets.shape
    ):
        return None
    n = outputs.numel()
    if n == 0 or n > FUSED_MAX_ELEMENTS:
        return None
    elementwise = _MSE_OPERATOR(outputs, targets, _NO_REDUCTION)
    # (sum, then a division by the count as mean_out does on the CPU; not `mean()`, whose
    # backward would make a full tensor of 1 / n: this one's stays a broadcast scalar)
    return elementwise.sum() / n, elementwise.detach()


def losses_of(deferred: Sequence[DeferredSampleLosses]) -> torch.Tensor:
    """The per-sample losses of `deferred` micro-batches, concatenated in their order:
    those of `step_sample_losses` on each, bit for bit. One concatenation and one mean
    per run of micro-batches of one dtype and sample shape (usually one run)."""
    if not deferred:
        return torch.zeros(0)
    tensors = [d.elementwise for d in deferred]
    dtype = tensors[0].dtype
    if all(t.dtype == dtype for t in tensors):
        # (one dtype: one run unless the sample shapes differ, which `torch.cat` refuses,
        # a RuntimeError; asked of it rather than compared here: issue 46's ninth round,
        # about 10 us a reduction of Python on the training thread)
        try:
            losses = tensors[0] if len(tensors) == 1 else torch.cat(tensors)
        except RuntimeError:
            pass
        else:
            return _per_sample_means(losses)
    keys = [(t.dtype, t.shape[1:]) for t in tensors]
    parts: list[torch.Tensor] = []
    start = 0
    for end in range(1, len(tensors) + 1):
        if end < len(tensors) and keys[end] == keys[start]:
            continue
        run = tensors[start:end]
        losses = run[0] if len(run) == 1 else torch.cat(run)
        parts.append(_per_sample_means(losses))
        start = end
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _per_sample_means(losses: torch.Tensor) -> torch.Tensor:
    """`losses` (elementwise, first dimension the samples) averaged per sample."""
    dims = losses.dim()
    if dims == 2:  # (the reshape below would be the identity: one op fewer per step)
        return losses.mean(dim=1)
    return losses.reshape(losses.shape[0], -1).mean(dim=1) if dims > 1 else losses
