"""The serving hook's inference path (`Inference`): requests' arrays through the user's
`process_inputs` (the inference counterpart of `process_sample`), stacked, on the
device, through the model under ``torch.no_grad()`` in eval mode and the trainer's
autocast, and its output through `process_outputs`, split per request into numpy
arrays of wire dtypes. One path for the simulations' requests and in-process callers.

Thread-safety: none of its own; the caller holds the model (`ServingHook`'s lock).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from accelerate.utils import send_to_device

from melissa_trainer.core.dataset import fast_collate
from melissa_trainer.wire import DTYPE_CODES, FieldSpec

__all__ = ["Inference"]


class Inference:
    """`process_inputs` (one request's arrays -> the model's input; default: the single
    input as a tensor) and `process_outputs` (the model's batched output -> named
    tensors; default ``{"prediction": output}``) around the model.

    Raises (at construction): ValueError with several inputs and no `process_inputs`.
    """

    def __init__(
        self,
        inputs: list[FieldSpec],
        process_inputs: Callable[[Mapping[str, np.ndarray]], Any] | None,
        process_outputs: Callable[[Any], Mapping[str, torch.Tensor]] | None,
    ) -> None:
        if process_inputs is None and len(inputs) != 1:
            raise ValueError(
                f"ServingHook: with {len(inputs)} inputs, give process_inputs (a "
                "request's arrays -> the model's input)"
            )
        self._process_inputs = process_inputs or _single_input(inputs[0].name)
        self._process_outputs = process_outputs or _default_outputs
        self._model: tuple[Any, torch.nn.Module] | None = None  # (prepared, unwrapped)

    def _unwrapped(self, trainer: Any) -> torch.nn.Module:
        """The trainer's model without its wrappers (not DDP's forward: no collective),
        found once per prepared model (`unwrap_model` looks for packages at each call:
        half of a small batch's serving time)."""
        prepared = trainer.model
        if self._model is None or self._model[0] is not prepared:
            self._model = (prepared, trainer.accelerator.unwrap_model(prepared))
        return self._model[1]

    def run(
        self, trainer: Any, samples: Sequence[Mapping[str, np.ndarray]]
    ) -> list[dict[str, np.ndarray]]:
        """One batch of `samples` through `trainer`'s model: one dict of arrays each.

        Raises whatever the user's functions or the model raise, and ValueError for
        outputs that are not tensors of first dimension ``len(samples)`` or not of a
        wire dtype (bfloat16 is sent as float32).
        """
        acc = trainer.accelerator
        model = self._unwrapped(trainer)
        examples = [self._process_inputs(s) for s in samples]
        batch = send_to_device(fast_collate(examples), acc.device)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), acc.autocast():
                named = self._process_outputs(model(batch))
        finally:
            model.train(was_training)
        out: list[dict[str, np.ndarray]] = [{} for _ in samples]
        for name, tensor in named.items():
            if (
                not isinstance(tensor, torch.Tensor)
                or tensor.ndim < 1
                or len(tensor) != len(samples)
            ):
                raise ValueError(
                    f"process_outputs: {name!r} must be a tensor of first dimension "
                    f"{len(samples)} (the batch), not {type(tensor).__name__} "
                    f"{getattr(tensor, 'shape', '')}"
                )
            if tensor.dtype == torch.bfloat16:
                tensor = tensor.float()  # (no bfloat16 on the wire)
            array = tensor.detach().cpu().numpy()  # (waits for the device: timed whole)
            if array.dtype not in DTYPE_CODES:
                raise ValueError(f"process_outputs: {name!r} is {array.dtype}, not a wire dtype")
            for i in range(len(samples)):
                out[i][name] = array[i]
        return out


def _single_input(name: str) -> Callable[[Mapping[str, np.ndarray]], torch.Tensor]:
    def process(arrays: Mapping[str, np.ndarray]) -> torch.Tensor:
        return torch.from_numpy(np.array(arrays[name]))  # (a copy: frames are read-only)

    return process


def _default_outputs(output: Any) -> Mapping[str, torch.Tensor]:
    if isinstance(output, Mapping):
        return output
    return {"prediction": output}
