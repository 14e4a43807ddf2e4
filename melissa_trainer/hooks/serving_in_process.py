"""What a `ServingHook` answers the callers in the trainer's own process (a hook, an
adaptive sampler): `InProcessPrediction`; `check_now`, what a request run at once on
the training thread must pass; and `queued`, a request from a thread other than the
training thread, queued like a simulation's and waited for.

On the training thread the hook runs the model at once (`ServingHook.predict_batch`);
from another thread the model is not its to run (a step may be running), so the
request joins the rank's queue, counted as a simulation's is, and is answered at the
next step's end, or by the idle thread while training waits.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np

from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_queue import ServingRefused
from melissa_trainer.stream.serving_requests import arrays_problem

__all__ = ["InProcessPrediction", "check_now", "queued", "request_arrays"]

#: a request's bound in milliseconds at most (the wire's u32, as a simulation's)
_MAX_MS = 2**32 - 1
#: one wait's bound at most: `threading`'s waits raise OverflowError past TIMEOUT_MAX
#: (about 292 years on Linux; a timeout of 1e10 s did, a user's trial)
_SLICE = 3600.0


class InProcessPrediction(NamedTuple):
    """Outputs (numpy arrays, by name) and the model version (global step)."""

    outputs: Any
    version: int


def check_now(server: PredictServer, arrays: list[dict[str, np.ndarray]]) -> None:
    """Raise what `PredictServer.submit` would for `arrays`, requests run at once on
    the training thread: ServingRefused when not serving (before TRAIN_START, after
    LOOP_END); ValueError for arrays that are not the declared inputs or hold NaN or
    Inf under the ``nonfinite`` policy (`serving_requests.arrays_problem`)."""
    if not server.serving:
        raise ServingRefused("not_serving", "before TRAIN_START or after LOOP_END")
    for a in arrays:
        problem = arrays_problem(a, server.inputs, server.nonfinite)
        if problem is not None:
            raise ValueError(problem)


def queued(
    server: PredictServer, arrays: list[dict[str, np.ndarray]], timeout: float | None
) -> InProcessPrediction:
    """Queue one request per element of `arrays` on `server` and wait, blocking up to
    `timeout` seconds in all (None: no bound), for every answer: the outputs in order,
    and the newest model version that answered.

    Raises:
        ValueError, ServingRefused: from `server.submit`, nothing queued then (inputs
            not the declared ones, no room in the queue for them all, not serving), or the
            first refusal of an answer; ValueError
            for more requests than the queue holds (`max_queue`: none could all wait)
            or a `timeout` NaN, infinite or not > 0, before anything is queued.
        TimeoutError: not every request was answered within `timeout`.
    """
    done = [threading.Event() for _ in arrays]
    results: list[Any] = [None] * len(arrays)

    def deliver(i: int) -> Callable[[Any, int, str], None]:
        def put(outputs: Any, version: int, error: str) -> None:
            results[i] = (outputs, version, error)
            done[i].set()

        return put

    if timeout is not None and (not isinstance(timeout, numbers.Real)
                                or not 0 < timeout < math.inf):  # fmt: skip
        # (before anything is queued: NaN raised "cannot convert float NaN to integer",
        # inf OverflowError, a user's trial; None is the unbounded wait; 0 or less, as a
        # `Predictor`'s: it queued a request that could never be waited for and raised
        # TimeoutError "no training step ended within -1 s", hserve2's trial)
        raise ValueError(
            f"timeout must be a finite number of seconds > 0, or None for no bound, not {timeout!r}"
        )
    if len(arrays) > server.max_queue:
        # (else the first max_queue were queued, to be run for no one, and the rest
        # refused "busy: N requests wait already", the batch's own; a user's trial)
        raise ValueError(
            f"predict_batch(): {len(arrays)} requests from a thread other than the training "
            f"thread, more than the rank's queue holds (max_queue={server.max_queue}): ask "
            f"in batches of at most {server.max_queue}, or give ServingHook(max_queue=...)"
        )
    # (capped before rounding: the milliseconds of 1e308 s are not finite)
    timeout_ms = 0 if timeout is None else max(1, round(min(timeout * 1000, _MAX_MS)))
    # (all or none: a batch refused partway had its first requests run later, for a
    # caller told "busy" or ValueError; a user's trial)
    server.submit([(a, deliver(i)) for i, a in enumerate(arrays)], timeout_ms)
    deadline = None if timeout is None else time.monotonic() + timeout
    for event in done:
        if not _wait(event, deadline):
            raise TimeoutError(f"no training step ended within {timeout} s to serve the request")
    errors = [r[2] for r in results if r[2]]
    if errors:
        reason, _, detail = errors[0].partition(": ")
        raise ServingRefused(reason, detail)
    return InProcessPrediction([r[0] for r in results], max(r[1] for r in results))


def _wait(event: threading.Event, deadline: float | None) -> bool:
    """`event.wait` until `deadline` (monotonic; None: no bound), in slices of at most
    `_SLICE` seconds: True once set, False at the deadline."""
    while True:
        left = _SLICE if deadline is None else min(deadline - time.monotonic(), _SLICE)
        if event.wait(max(left, 0.0)):
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False


def request_arrays(samples: Iterable[Mapping[str, Any]]) -> list[dict[str, np.ndarray]]:
    """`samples` (`predict_batch`'s: a sequence of ``{name: array}``) as numpy arrays;
    TypeError naming the fix when `samples` is a mapping itself (one request given to
    `predict_batch`) or holds something else than mappings (an array passed bare): both
    raised AttributeError ("'str' object has no attribute 'items'"), a user's trial."""
    if isinstance(samples, Mapping) or not isinstance(samples, Iterable):
        raise TypeError(
            f"predict_batch(): samples must be a list of {{name: array}} mappings, one per "
            f"request, not {type(samples).__name__} (one request: predict(inputs))"
        )
    samples = list(samples)  # (a generator too, as before)
    for s in samples:
        if not isinstance(s, Mapping):
            raise TypeError(
                f"predict(): inputs must be a mapping of input names to arrays, not "
                f"{type(s).__name__}: pass {{'name': array}} (the names of "
                f"ServingHook(inputs=...))"
            )
    return [{k: np.asarray(v) for k, v in s.items()} for s in samples]
