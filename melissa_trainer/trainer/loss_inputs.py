"""What the default losses of `OnlineTrainer` take: batches of ``(inputs, targets)``,
and a model whose outputs are one tensor; anything else refused in the library's words,
naming the function that made it and the fix (trial 29: a ``dict`` batch from a user's
`collate_fn` blamed `process_sample`; a model returning ``{"logits": y}`` failed inside
torch's `mse_loss` with "'dict' object has no attribute 'size'").

Used by `losses.TrainerLosses`' default paths only: an overridden `compute_loss` or a
user's `loss_fn` gets whatever the batch and the model give. Type checks only: no
tensor read, no host sync.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from melissa_trainer.core.dataset import StreamDataset, fast_collate
from melissa_trainer.core.sample_losses import check_output_shape

__all__ = ["batch_maker", "check_outputs", "inputs_targets"]


def _what(value: Any) -> str:
    """`value`'s type in words, with a mapping's keys and a sequence's length."""
    name = type(value).__name__
    if isinstance(value, Mapping):
        return f"{name} with keys {list(value)[:8]}"
    if isinstance(value, tuple | list):
        return f"{name} of {len(value)}"
    return name


def batch_maker(dataset: StreamDataset) -> str:
    """The user's function that made the batches: process_batch, collate_fn, or
    process_sample (the default collate stacks what it returns)."""
    if dataset.process_batch is not None:
        return "process_batch"
    if dataset.collate_fn is not fast_collate:
        return "collate_fn"
    return "process_sample"


def inputs_targets(batch: Any, method: str, dataset: StreamDataset) -> tuple[Any, Any]:
    """`batch` as `(inputs, targets)`, else a TypeError naming what it is, the default
    `method`, and the user's function that made it (`batch_maker`)."""
    if isinstance(batch, tuple | list) and len(batch) == 2:
        return batch[0], batch[1]
    maker = batch_maker(dataset)
    which = "its batches" if maker != "process_sample" else "its examples (stacked)"
    raise TypeError(
        f"the default {method} expects batches of (inputs, targets) and got a "
        f"{_what(batch)}, made by {maker}: return a 2-tuple (inputs, targets) from "
        f"{maker} ({which}), or override OnlineTrainer.{method}"
    )


def check_outputs(loss_fn: Any, outputs: Any, targets: Any) -> None:
    """The model's first outputs under the default `loss_fn` (torch's `mse_loss`):
    refused unless a tensor, naming its type and the fix; then their shape against the
    targets' (`check_output_shape`, any of torch's elementwise losses).

    Raises:
        ValueError: outputs that are not a tensor under the default loss, or of a shape
            that would broadcast (`check_output_shape`).
    """
    if loss_fn is torch.nn.functional.mse_loss and not isinstance(outputs, torch.Tensor):
        if isinstance(outputs, Mapping) and outputs:
            part = f"outputs[{next(iter(outputs))!r}]"
        elif isinstance(outputs, tuple | list) and outputs:
            part = "outputs[0]"
        else:
            part = "the prediction in outputs"
        raise ValueError(
            f"the model returned a {_what(outputs)}, and the default loss (mse_loss) "
            f"takes one tensor of the targets' shape: pass OnlineTrainer(..., "
            f"loss_fn=lambda outputs, targets: torch.nn.functional.mse_loss({part}, "
            f"targets)), or override OnlineTrainer.compute_loss, or make the model "
            f"return the tensor"
        )
    check_output_shape(loss_fn, outputs, targets)
