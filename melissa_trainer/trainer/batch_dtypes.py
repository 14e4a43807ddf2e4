"""A batch whose floating tensors are not of the model's dtype, said in the library's
words when the first training step fails on it: a user trial's `process_sample`
returned ``torch.tensor([...])`` of a NumPy array's float64 values, and the step failed in
the model with torch's "mat1 and mat2 must have the same dtype, but got Double and
Float", no word of `process_sample` nor of the fix.

Said, not refused up front: a batch of another dtype is legitimate where the model
casts its inputs itself, where the loss promotes float64 targets, or under mixed
precision (autocast takes float32 or half inputs alike); only a first step that raises
torch's dtype error with such a batch gets the words. The check reads dtypes only
(metadata: no tensor read, no host sync), once per trainer (`TrainerSteps`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from melissa_trainer.core.dataset import StreamDataset
from melissa_trainer.trainer.loss_inputs import batch_maker

__all__ = ["checked_first_backward", "dtype_mismatches"]


def dtype_mismatches(batch: Any, dtype: torch.dtype, where: str = "batch") -> list[str]:
    """``"batch[0] is torch.float64"`` for each floating tensor of `batch` (a tensor, or
    tuples, lists and mappings of them) whose dtype is not `dtype`; dtypes only."""
    if isinstance(batch, torch.Tensor):
        wrong = batch.is_floating_point() and batch.dtype != dtype
        return [f"{where} is {batch.dtype}"] if wrong else []
    if isinstance(batch, Mapping):
        items: Any = ((f"{where}[{k!r}]", v) for k, v in batch.items())
    elif isinstance(batch, tuple | list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(batch))
    else:
        return []
    return [line for part, value in items for line in dtype_mismatches(value, dtype, part)]


def _model_dtype(model: torch.nn.Module) -> torch.dtype | None:
    """The dtype of the model's first floating parameter; None without one."""
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), None)


def checked_first_backward(
    backward: Callable[[Any], torch.Tensor],
    batch: Any,
    model: torch.nn.Module,
    dataset: StreamDataset,
) -> torch.Tensor:
    """``backward(batch)``, the first micro-batch's; when it raises torch's dtype error
    (a RuntimeError naming a type) and some floating tensor of `batch` is not of the
    model's parameters' dtype, a RuntimeError naming the function that made the batch
    (`loss_inputs.batch_maker`), the batch's parts, both dtypes and the fix, chained
    from torch's. Any other failure propagates unchanged."""
    try:
        return backward(batch)
    except RuntimeError as exc:
        if "type" not in str(exc).lower():
            raise
        dtype = _model_dtype(model)
        wrong = [] if dtype is None else dtype_mismatches(batch, dtype)
        if dtype is None or not wrong:
            raise
        maker = batch_maker(dataset)
        convert = ".float()" if dtype == torch.float32 else f".to({dtype})"
        theirs = wrong[0].rsplit(" ", 1)[1]
        raise RuntimeError(
            f"{maker} made a batch whose {', '.join(wrong)}, but the model's parameters "
            f"are {dtype}: return {dtype} tensors from {maker} (torch.tensor(..., "
            f"dtype={dtype}), or {convert} on a tensor: torch.tensor or torch.from_numpy of "
            f"a float64 NumPy array, or of its elements, is float64), or convert the model "
            f"(model.to({theirs})). Torch said: {str(exc).splitlines()[0]}"
        ) from exc
