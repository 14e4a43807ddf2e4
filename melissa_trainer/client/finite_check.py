"""The client's check for NaN and Inf: a float field that passes it leaves with
FLAG_FINITE, so that the trainer's receiver does not read it again.

The check is the receiver's own (`melissa_trainer.stream.finite.all_finite`), run here
on the simulation's core instead of the trainer's (docs/measured.md, issue 28, for
what it costs each side). A field that fails it is sent all the same, without the
flag: the receiver checks it and applies its ``nonfinite`` policy (refuse, fail or
accept), unchanged. The client says so once per client in the simulation's own log
(a warning naming the simulation, the step and the field: where a user looks first),
not once per step.

Integer and boolean fields cannot hold NaN: they are never checked, never flagged.

A prediction's inputs (`predict`) are sent as they are too, NaN or not: the trainer's
serving socket applies the same policy to them (refused ``bad_request`` unless
``nonfinite='accept'``: `melissa_trainer.stream.serving_requests`). The client says
so once per client or predictor (`warn_nonfinite_inputs`), as for the fields it sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from melissa_trainer.stream.finite import all_finite

if TYPE_CHECKING:  # pragma: no cover
    import logging

__all__ = ["FiniteCheck", "checked_dtype", "warn_nonfinite_inputs"]

#: dtype kinds the client checks (the protocol's float16, float32 and float64)
_CHECKED_KINDS = frozenset("f")


def checked_dtype(dtype: np.dtype) -> bool:
    """Whether fields of `dtype` are checked (and may carry FLAG_FINITE)."""
    return dtype.kind in _CHECKED_KINDS


def _logger() -> logging.Logger:
    """The client's logger, imported on the rare path that warns (`logging` would
    lengthen every simulation's start-up otherwise: see `melissa_trainer.client.client`)."""
    import logging

    return logging.getLogger("melissa_trainer.client.client")


class FiniteCheck:
    """One client's check of the fields it sends, and its one warning.

    Thread-safety: called with the client's socket lock held (by the client's thread
    and the outbox's flusher); `warned` is a plain flag (at worst, two threads racing
    would each warn once).
    """

    __slots__ = ("simulation_id", "rank", "warned")

    def __init__(self, simulation_id: int, rank: int) -> None:
        self.simulation_id, self.rank = simulation_id, rank
        self.warned = False

    def passes(self, name: str, time_step: int, arr: np.ndarray) -> bool:
        """True if every value of `arr` (a float field's payload) is finite; else warns
        (the first time) and returns False: the field goes without FLAG_FINITE."""
        if all_finite(arr):
            return True
        self.nonfinite(name, time_step)
        return False

    def nonfinite(self, name: str, time_step: int) -> None:
        """Field `name` of `time_step` holds NaN or Inf: warn, once per client."""
        if self.warned:
            return
        self.warned = True
        _logger().warning(
            "simulation %d rank %d: field %r of time step %d holds NaN or Inf; it is sent "
            "without FLAG_FINITE and the trainer applies its nonfinite policy to it (by "
            "default the sample is dropped). Later non-finite fields of this client are "
            "not logged.",
            self.simulation_id,
            self.rank,
            name,
            time_step,
        )


def warn_nonfinite_inputs(
    arrays: Mapping[str, np.ndarray], who: str, owner: str = "predictor"
) -> bool:
    """Warn if a float array of `arrays` (a prediction's inputs) holds NaN or Inf, naming
    it; True if warned (the caller then checks no more: once per `owner`). `who` names
    the asker: ``simulation N`` for a `Client`'s requests (the C client's words,
    finite_notice.c), ``Predictor(simulation_id=N)`` for a `Predictor` of its own, which
    need not be a simulation's (an analysis script's: "simulation N" named one that
    did not exist, "this client" an object it never made). Nothing is refused here: the
    trainer decides, by its ``nonfinite`` policy."""
    for name, arr in arrays.items():
        if checked_dtype(arr.dtype) and arr.size and not all_finite(arr):
            _logger().warning(
                "%s: predict() input %r holds NaN or Inf; it is sent as it is and the "
                "trainer applies its nonfinite policy to it (by default the request is "
                "refused: PredictRefused, reason 'bad_request'). Later non-finite inputs "
                "of this %s are not logged.",
                who,
                name,
                owner,
            )
            return True
    return False
