"""What a prediction request must be for a rank's `PredictServer` to queue it: decoded
within the declared inputs' bytes (`protocol.decode_predict`: nothing unpickled, every
size checked before an array is built), its arrays the declared inputs (names, dtypes,
shapes); and, when it is not, why, said so that its client can fix it (a refusal
``bad_request`` carries the reason: an unknown or missing input named, or the bytes
with the inputs the trainer serves). Run by the server's I/O thread on each request;
numpy and the protocol only.

And whether its inputs may hold NaN or Inf (`nonfinite_detail`): a request follows the
receiver's ``nonfinite`` policy, as the samples a simulation sends do
(`melissa_trainer.stream.nonfinite`): under ``"accept"`` it is served; under
``"refuse"`` (the default) and ``"fail"`` it is refused ``bad_request``, the detail
naming the input and the policy (a prediction's inputs are not training data: no
simulation is failed for them). Before, such a request was served, and answered NaN.
An in-process request (`ServingHook.predict`) passes the same checks (`arrays_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from melissa_trainer import wire as protocol
from melissa_trainer.stream.finite import FLOAT_KINDS, all_finite
from melissa_trainer.stream.serving_rendezvous import check_inputs
from melissa_trainer.wire import FieldSpec, PredictRequest, ProtocolError

__all__ = [
    "NONFINITE_PREFIX",
    "arrays_problem",
    "decode_request",
    "nonfinite_detail",
    "nonfinite_refusal",
]

#: how a refusal's detail for NaN or Inf inputs begins (``bad_request``)
NONFINITE_PREFIX = "nonfinite:"


def decode_request(
    parts: list[Any], inputs: Sequence[FieldSpec], max_request_bytes: int
) -> PredictRequest:
    """The request of the frames `parts` (a PREDICT's, without the peer's identity),
    its arrays the declared `inputs`, at most `max_request_bytes` of them.

    Raises:
        ProtocolError: malformed (the decoder's reasons), ``bad_inputs`` (arrays that
            are not `inputs`, the difference named), ``too_large`` (more bytes than the
            inputs', with the inputs declared).
    """
    try:
        request = protocol.decode_predict(parts, max_request_bytes)
        problem = check_inputs(request.arrays, inputs)
        if problem is not None:
            raise ProtocolError("bad_inputs", problem)
    except ProtocolError as exc:
        if exc.reason == "too_large":
            raise _too_large(parts, exc, inputs) from None
        raise
    return request


def _too_large(parts: list[Any], exc: ProtocolError, inputs: Sequence[FieldSpec]) -> ProtocolError:
    """What a request over the inputs' bytes is refused for: an unknown or missing
    input, named (the decoder stops at the bytes, before the names: an extra array
    read "too_large"), an input of another dtype or shape, named (most often a
    float64 array for a float32 input), else the bytes with the declared inputs. Its
    frames are received already, so decoding them bounded by their own size makes
    views and copies nothing."""
    received = sum(memoryview(p).nbytes for p in parts[1:])
    try:
        arrays = protocol.decode_predict(parts, received).arrays
    except ProtocolError:
        arrays = {}
    names = {f.name for f in inputs}
    if arrays and set(arrays) != names:
        return ProtocolError("bad_inputs", check_inputs(arrays, inputs) or "")
    problem = check_inputs(arrays, inputs) if arrays else None
    if problem is not None:  # (the dtype or shape that differs, first: the fix is a cast)
        return ProtocolError("too_large", f"{problem}: more bytes than the inputs'")
    declared = ", ".join(f"{f.name!r} {f.dtype.str} {f.shape}" for f in inputs)
    detail = str(exc).removeprefix("too_large: ")
    return ProtocolError("too_large", f"{detail}; the trainer serves {declared}")


def arrays_problem(
    arrays: Mapping[str, np.ndarray], inputs: Sequence[FieldSpec], policy: str
) -> str | None:
    """Why an in-process request's `arrays` are refused: not the declared `inputs`
    (`check_inputs`), or holding NaN or Inf under the ``nonfinite`` `policy`
    (`nonfinite_detail`); None when they are served. What the network's requests
    pass (`decode_request`, then `nonfinite_refusal`), for arrays already built."""
    return check_inputs(arrays, inputs) or nonfinite_detail(arrays, policy)


def nonfinite_detail(arrays: Mapping[str, np.ndarray], policy: str) -> str | None:
    """Why a request of `arrays` is refused under the ``nonfinite`` `policy` (module
    docstring): its first float input holding NaN or Inf, named; None when it is
    served (no such input, or `policy` ``"accept"``). One pass over each float
    input's bytes (`all_finite`)."""
    if policy == "accept":
        return None
    for name, arr in arrays.items():
        if arr.dtype.kind in FLOAT_KINDS and arr.size and not all_finite(arr):
            return (
                f"{NONFINITE_PREFIX} input {name!r} holds NaN or Inf; this trainer refuses "
                f"such requests (its nonfinite={policy!r}; nonfinite='accept' serves them)"
            )
    return None


def nonfinite_refusal(
    request: PredictRequest, policy: str, version: int
) -> tuple[str, bytes] | None:
    """`nonfinite_detail`, and the REFUSED (``bad_request``, at model `version`) that
    answers `request` with it; None when it is served."""
    detail = nonfinite_detail(request.arrays, policy)
    if detail is None:
        return None
    frame = protocol.encode_refused(
        request.simulation_id, request.request_id, version, "bad_request", detail
    )
    return detail, frame
