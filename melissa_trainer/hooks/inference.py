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
from melissa_trainer.hooks.serving_checks import NotAMappingError, check_outputs, not_a_mapping
from melissa_trainer.wire import DTYPE_CODES, FieldSpec, encode_prediction

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
        outputs: list[FieldSpec] | None = None,
    ) -> None:
        if process_inputs is None and len(inputs) != 1:
            raise ValueError(
                f"ServingHook: with {len(inputs)} inputs, give process_inputs (a "
                "request's arrays -> the model's input)"
            )
        self._process_inputs = process_inputs or _single_input(inputs[0].name)
        self._process_outputs = process_outputs or _default_outputs
        #: the outputs declared (`ServingHook.outputs`), None: not declared
        self.outputs = outputs
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
        outputs that a PREDICTION cannot carry: not a mapping of names to tensors, not
        tensors of shape ``(len(samples), *declared shape)`` (`outputs`; none
        declared: of first dimension ``len(samples)``: `serving_checks.check_outputs`),
        not of a wire dtype (bfloat16 is sent as float32; a declared output as its
        declared dtype), a name not of 1 to 255 bytes, more than `MAX_NDIM`
        dimensions per request, more than `MAX_PREDICT_ARRAYS` outputs. Strided
        outputs (a slice, a transpose) are copied into C order: each request's row is
        contiguous, as the wire needs.
        """
        return self.split(self.forward(trainer, samples), len(samples))

    def forward(
        self, trainer: Any, samples: Sequence[Mapping[str, np.ndarray]]
    ) -> Mapping[str, Any]:
        """What `process_outputs` returned for `samples`, checked to be a mapping (the
        model run as `run` says); raises what the user's functions or the model raise."""
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
        if not isinstance(named, Mapping):
            # (a model's output returned as it is, a tensor or a tuple, raised an
            # AttributeError from inside the library naming neither the function nor
            # the fix)
            raise NotAMappingError(not_a_mapping(named))
        return named

    def split(self, named: Mapping[str, Any], n: int) -> list[dict[str, np.ndarray]]:
        """`forward`'s outputs for `n` requests, checked (`run`), one dict per request."""
        check_outputs(named, n, self.outputs)
        dtypes = {f.name: f.dtype for f in self.outputs or ()}
        out: list[dict[str, np.ndarray]] = [{} for _ in range(n)]
        for name, tensor in named.items():
            if tensor.dtype == torch.bfloat16:
                tensor = tensor.float()  # (no bfloat16 on the wire)
            # (waits for the device: timed whole.) C order: a strided output, e.g.
            # `out[:, ::2]`, has rows the wire cannot send without a copy; one copy of
            # the batch here instead of an error at the answer.
            array = np.ascontiguousarray(tensor.detach().cpu().numpy())
            if name in dtypes:  # (autocast's float16 for a declared float32: as declared)
                array = array.astype(dtypes[name], copy=False)
            if array.dtype not in DTYPE_CODES:
                raise ValueError(f"process_outputs: {name!r} is {array.dtype}, not a wire dtype")
            for i in range(n):
                out[i][name] = array[i]
        # The wire's own checks (names, dimensions, count), on one row: an output the
        # PREDICTION cannot carry fails here, where the caller refuses the batch
        # `failed`, not in the answer, which would raise in the training thread (ending
        # the run) or in the idle thread (ending idle serving).
        if out:
            try:
                encode_prediction(0, 0, 0, out[0])
            except ValueError as exc:
                raise ValueError(f"process_outputs: the outputs cannot be sent: {exc}") from None
        return out


def _single_input(name: str) -> Callable[[Mapping[str, np.ndarray]], torch.Tensor]:
    def process(arrays: Mapping[str, np.ndarray]) -> torch.Tensor:
        return torch.from_numpy(np.array(arrays[name]))  # (a copy: frames are read-only)

    return process


def _default_outputs(output: Any) -> Mapping[str, torch.Tensor]:
    if isinstance(output, Mapping):
        return output
    return {"prediction": output}
