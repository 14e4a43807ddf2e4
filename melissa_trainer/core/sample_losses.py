"""The per-sample losses of a micro-batch: how the trainer computes them when a hook
asks (the SAMPLE_LOSSES event; from the step's own outputs, one forward pass),
and the refusal of a trainer class whose own loss would be bypassed.

Nothing here knows what the losses are for: the `SimulationLossTracker` hook sums them
per simulation (`melissa_trainer.core.loss_per_simulation`), a user hook may do anything else.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["check_loss_overrides", "per_sample_losses"]


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
    dims = losses.dim()
    if dims == 2:  # (the reshape below would be the identity: one op fewer per step)
        return losses.mean(dim=1)
    return losses.reshape(losses.shape[0], -1).mean(dim=1) if dims > 1 else losses
