"""The checks of a `ServingHook`'s arguments at its construction (`check_serving`), each
error naming the ``ServingHook.`` field and the fix, as its other fields' do. A user
trial found `bind` unchecked (``"junk"``, a TCP endpoint without a port: training
failed 31 s later, with a traceback, once the receivers had started), `process_outputs`
unchecked (an int: the first served batch failed), and `max_queue`'s and an empty
`inputs`' messages without the field's name (the server's and the wire's words).

And the check of what `process_outputs` returns (`check_outputs`), on every served
batch and once at training's start (`probe_outputs`, run by `ServingHook` at
TRAIN_START on `probe_sizes` requests of zeros): each output a tensor of shape
``(batch, *declared_shape)`` (`ServingHook.outputs`), or, none declared, of first
dimension the batch and the same per-request shape for two batch sizes. Before, only
the first dimension was checked, per batch: a `process_outputs` that dropped the batch
dimension (``out[0]``, ``out.squeeze()``) passed whenever the batch happened to equal
that first dimension (each request then got a slice of the first request's answer),
and was refused ``failed`` request by request otherwise, for the whole run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from melissa_trainer import wire as protocol
from melissa_trainer.stream.receiver_address import bind_fault
from melissa_trainer.wire import FieldSpec

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView
    from melissa_trainer.hooks.inference import Inference

__all__ = [
    "NotAMappingError",
    "check_limits",
    "check_outputs",
    "check_serving",
    "declared_outputs",
    "not_a_mapping",
    "probe_model",
    "probe_outputs",
    "probe_sizes",
]


class NotAMappingError(ValueError):
    """`process_outputs` returned something other than a mapping of names to tensors (a
    tensor, a tuple): true of every request alike, so the probe at the start raises it
    rather than skipping (`probe_outputs`)."""


#: what an output must be, said in `check_outputs`' errors
_ROWS = "one row per request, the batch first"


def check_serving(
    inputs: Any, process_inputs: Any, process_outputs: Any, max_queue: Any, bind: Any
) -> None:
    """Raise ValueError naming the `ServingHook` field when one of these is not what
    its docstring says (``share`` is checked where it is used, `ServingBudget`;
    ``max_batch`` and ``max_latency_steps`` by `check_limits`, after it)."""
    if not isinstance(inputs, Mapping | list | tuple) or not inputs:
        raise ValueError(
            "ServingHook.inputs must declare at least one input, {name: (shape, dtype)} "
            f"as a request carries it (e.g. {{'u': ((64,), 'float32')}}), not {inputs!r}"
        )
    try:
        protocol.field_specs(inputs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ServingHook.inputs: {exc}") from None
    for name, value in (("process_inputs", process_inputs), ("process_outputs", process_outputs)):
        if value is not None and not callable(value):
            raise ValueError(
                f"ServingHook.{name} must be a callable (a function, a lambda) or None for "
                f"the default, not {value!r}"
            )
    if not isinstance(max_queue, int) or isinstance(max_queue, bool) or max_queue < 1:
        raise ValueError(
            f"ServingHook.max_queue must be an integer >= 1 (requests waiting at most per "
            f"rank), not {max_queue!r}"
        )
    fault = None if bind is None else bind_fault(bind)
    if fault is not None:
        raise ValueError(
            f"ServingHook.bind must be {fault}; got {bind!r}: e.g. tcp://127.0.0.1:6000 (rank "
            "r binds port 6000 + r), tcp://*:* (every interface, a random port), or None "
            "(the receiver's interface, a random port)"
        )


def check_limits(max_batch: Any, max_latency_steps: Any) -> None:
    """Raise ValueError naming the `ServingHook` field when `max_batch` is not an integer
    >= 1, or `max_latency_steps` neither an integer >= 0 nor None."""
    if not isinstance(max_batch, int) or isinstance(max_batch, bool) or max_batch < 1:
        raise ValueError(f"ServingHook.max_batch must be an integer >= 1, not {max_batch!r}")
    if max_latency_steps is not None and (
        not isinstance(max_latency_steps, int)
        or isinstance(max_latency_steps, bool)
        or max_latency_steps < 0
    ):
        raise ValueError(
            "ServingHook.max_latency_steps must be an integer >= 0 (steps a request may "
            f"wait) or None (no bound but the budget), not {max_latency_steps!r}"
        )


def declared_outputs(outputs: Any) -> list[FieldSpec] | None:
    """`ServingHook.outputs` as FieldSpecs (None: not declared), else ValueError naming
    the field."""
    if outputs is None:
        return None
    if not isinstance(outputs, Mapping) or not outputs:
        raise ValueError(
            "ServingHook.outputs must declare the outputs of one request, {name: (shape, "
            "dtype)} as process_outputs names them, without the batch dimension (e.g. "
            f"{{'u_next': ((64,), 'float32')}}), or be None; not {outputs!r}"
        )
    try:
        return protocol.field_specs(outputs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ServingHook.outputs: {exc}") from None


def not_a_mapping(named: object) -> str:
    """The error of a `process_outputs` that returned `named`, not a mapping."""
    return (
        "ServingHook.process_outputs must return a mapping of output names to tensors "
        f"(e.g. {{'prediction': output}}), not {type(named).__name__}"
    )


def check_outputs(
    named: Mapping[str, Any], batch: int, declared: Sequence[FieldSpec] | None
) -> None:
    """Raise ValueError, naming ``ServingHook.process_outputs``, the output, the shape
    it returned and the shape required, unless every value of `named` (what
    `process_outputs` returned for `batch` requests, a mapping) is a tensor of shape
    ``(batch, *shape)`` of its declared output (`declared`: the names too, exactly),
    or, none declared, a tensor of at least one dimension, the first `batch`."""
    by_name = {} if declared is None else {f.name: f for f in declared}
    if declared is not None and set(named) != set(by_name):
        raise ValueError(
            f"ServingHook.process_outputs returned the outputs {sorted(named)}; "
            f"ServingHook.outputs declares {sorted(by_name)}"
        )
    for name, tensor in named.items():
        shape = tuple(getattr(tensor, "shape", ()))
        spec = by_name.get(name)
        if spec is not None:
            required: tuple[int, ...] = (batch, *spec.shape)
            if hasattr(tensor, "detach") and shape == required:
                continue
            want = f"{required} (batch, *declared {tuple(spec.shape)}: {_ROWS})"
        else:
            if hasattr(tensor, "detach") and len(shape) >= 1 and shape[0] == batch:
                continue
            want = f"({batch}, ...) ({_ROWS})"
        got = f"of shape {shape}" if hasattr(tensor, "detach") else type(tensor).__name__
        raise ValueError(
            f"ServingHook.process_outputs returned {name!r} {got} for a batch of {batch} "
            f"request{'s' if batch != 1 else ''}; required a tensor of shape {want}"
        )


def probe_sizes(inputs: Sequence[FieldSpec], outputs: Sequence[FieldSpec] | None) -> list[int]:
    """The batch sizes of the probe (`probe_outputs`): the two smallest integers >= 2
    that are no declared dimension (inputs', outputs'), so that an output without its
    batch dimension cannot pass by having a first dimension equal to the batch (one
    size is enough when the outputs are declared: their shapes are checked whole)."""
    dims = {d for f in (*inputs, *(outputs or ())) for d in f.shape}
    sizes: list[int] = []
    size = 2
    while len(sizes) < (1 if outputs is not None else 2):
        if size not in dims:
            sizes.append(size)
        size += 1
    return sizes


def probe_outputs(
    forward: Callable[[list[dict[str, np.ndarray]]], Mapping[str, Any]],
    inputs: Sequence[FieldSpec],
    outputs: Sequence[FieldSpec] | None,
) -> str | None:
    """Run `forward` (requests' arrays -> what `process_outputs` returned) on batches
    of `probe_sizes` requests of zeros of the declared `inputs`, and check what it
    returned (`check_outputs`; none declared: also the same per-request shapes for both
    sizes). Raises that ValueError, and `forward`'s `NotAMappingError`. Returns why the
    probe could not run (`forward` raised otherwise on zeros: the user's functions or
    the model, whose errors each served batch reports), else None."""
    seen: dict[str, tuple[int, tuple[int, ...]]] = {}
    for size in probe_sizes(inputs, outputs):
        zeros = [{f.name: np.zeros(f.shape, f.dtype) for f in inputs} for _ in range(size)]
        try:
            named = forward(zeros)
        except NotAMappingError:
            # (skipped, a run served nothing but refusals, training as if all were well)
            raise
        except Exception as exc:  # (not a shape error: the requests will report it)
            return f"{type(exc).__name__}: {exc}"
        if not isinstance(named, Mapping):
            raise NotAMappingError(not_a_mapping(named))
        check_outputs(named, size, outputs)
        for name, tensor in named.items():
            first = seen.setdefault(name, (size, tuple(tensor.shape)))
            if first[1][1:] != tuple(tensor.shape)[1:]:
                raise ValueError(
                    f"ServingHook.process_outputs returned {name!r} of shape {first[1]} for "
                    f"a batch of {first[0]} requests and {tuple(tensor.shape)} for "
                    f"{size}: required (batch, *one request's shape), {_ROWS}"
                )
    return None


def probe_model(
    trainer: TrainerView,
    inference: Inference,
    inputs: Sequence[FieldSpec],
    outputs: Sequence[FieldSpec] | None,
    logger: logging.Logger,
) -> None:
    """Check `process_outputs`' shapes on requests of zeros (`probe_outputs`), the
    random state left as it was (a model drawing noise in eval mode: training
    draws the same with serving as without); a probe that could not run is said to
    `logger` (INFO)."""
    device = trainer.accelerator.device
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        skipped = probe_outputs(lambda zeros: inference.forward(trainer, zeros), inputs, outputs)
    if skipped is not None:
        logger.info(
            "serving: process_outputs' shapes not checked at the start (a request of "
            "zeros raised %s); each served batch is checked",
            skipped,
        )
