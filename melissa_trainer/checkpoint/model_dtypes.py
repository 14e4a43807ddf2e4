"""What a resume says of a model built in another dtype than the checkpoint's weights.

A checkpoint's ``model.safetensors`` holds the weights in the dtype the run trained in.
A script that resumes it with the model built otherwise (``model.double()``,
``model.to(torch.bfloat16)``: no `TrainingArguments`, so `resumed_args` cannot name it)
loads without a word: `load_state_dict` copies each tensor into the model's own dtype,
and the optimizer's `load_state_dict` casts its state (Adam's moments) to the
parameters' dtype likewise. The run goes on, but not as the checkpoint's run would have
(a float32 run resumed in bfloat16 has its weights rounded; Hugging Face's Trainer says
nothing either). So the resume names the change in one warning of the main rank, with
the dtypes on both sides and how to continue exactly (`changed_dtypes`, `warn_changed`).
A model of another shape is refused elsewhere (`load_state_dict`'s strict load).

Reads only the file's header (safetensors' `safe_open`: no tensor is read).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import safe_open

__all__ = ["MODEL_FILE", "changed_dtypes", "saved_dtypes", "warn_changed"]

logger = logging.getLogger(__name__)

#: Accelerate's name for the first prepared model's weights in a checkpoint
MODEL_FILE = "model.safetensors"

#: how many tensor names a warning lists before it says how many more there are
_SHOWN = 4


def saved_dtypes(path: Path) -> dict[str, str]:
    """Each tensor's dtype in checkpoint `path`'s `MODEL_FILE`, as torch names it
    (``"float32"``); empty when the checkpoint has no such file (a model saved another
    way: nothing to compare)."""
    file = path / MODEL_FILE
    if not file.is_file():
        return {}
    with safe_open(str(file), framework="pt") as weights:
        return {name: _torch_name(weights.get_slice(name).get_dtype()) for name in weights.keys()}  # noqa: SIM118 (a safe_open, no dict)


#: safetensors' dtype names (``F32``, ``BF16``) as torch's (``float32``)
_TORCH_NAMES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}


def _torch_name(dtype: str) -> str:
    """safetensors' dtype name as torch's (`_TORCH_NAMES`; another kept as it is)."""
    return _TORCH_NAMES.get(dtype, dtype)


def changed_dtypes(
    saved: Mapping[str, str], model: Mapping[str, torch.Tensor]
) -> dict[tuple[str, str], list[str]]:
    """The tensors of `model` (a `state_dict`) whose dtype is not `saved`'s (the
    checkpoint's, `saved_dtypes`), grouped by ``(saved dtype, model dtype)``, in the
    model's order. Tensors only one side has (tied weights saved once) are left out: the
    strict load refuses a real mismatch of names."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, tensor in model.items():
        if name not in saved:
            continue
        before = saved[name]
        now = str(tensor.dtype).removeprefix("torch.")
        if before != now:
            found.setdefault((before, now), []).append(name)
    return found


def warn_changed(path: Path, model: torch.nn.Module) -> None:
    """Log one warning naming the tensors of `model` (the unwrapped module, as loaded
    from checkpoint `path`) that the checkpoint holds in another dtype, or nothing."""
    changes = changed_dtypes(saved_dtypes(path), model.state_dict())
    if not changes:
        return
    parts = []
    for (before, now), names in changes.items():
        shown = ", ".join(names[:_SHOWN])
        more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
        parts.append(f"{before} -> {now} ({shown}{more})")
    saved = sorted({before for before, _ in changes})
    logger.warning(
        "resuming from %s with the model built in another dtype than the checkpoint's "
        "weights: %s. They were converted to your model's dtype on loading, and the "
        "optimizer's state with them: the run goes on, but it is not the run that "
        "checkpoint's would have been (build the model in %s to continue it exactly)",
        path,
        "; ".join(parts),
        " / ".join(saved),
    )
