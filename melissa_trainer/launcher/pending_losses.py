"""`PendingLosses`: the simulations' losses reported for an adaptive sampler, held until
its next draw.

A study's trainer reports every simulation's loss every few steps, hundreds of times
per draw; only the newest of each matters to the next draw, so the sampler observes
each simulation once per draw instead of once per report (issue 46: its cost on the
training thread). The sampler's state is the same as if each had been observed at once:
its observations keep the newest loss of each simulation, in the order of their newest
report (`AdaptiveSampler.observe`), and these are given in that order.

`StudyRecord` owns one, and says when they are given (`apply`): before its sampler's
next draw, in its `state_dict`, and when the launcher stops. Not thread-safe: the
launcher calls the record under its lock.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping

from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.simulation_record import SimulationRecord

__all__ = ["PendingLosses"]


class PendingLosses:
    """The losses noted and not yet given to the sampler (see the module docstring)."""

    def __init__(self) -> None:
        #: id -> loss, in the order of their newest report
        self._losses: dict[int, float] = {}

    def note(
        self,
        sampler: Sampler,
        records: Mapping[int, SimulationRecord],
        losses: Mapping[int, float],
    ) -> tuple[int, list[int]]:
        """Note each simulation's loss; returns how many were noted and the ids skipped:
        a non-finite loss (a diverged simulation steers nothing) or an id not in
        `records` (never drawn).

        Raises:
            TypeError: `sampler` is not an `AdaptiveSampler`.
            ValueError: a loss that is not a number (nothing is noted then).
        """
        if not isinstance(sampler, AdaptiveSampler):
            raise TypeError(
                f"the study's sampler ({type(sampler).__name__}) is not adaptive: it "
                "observes no losses (make_sampler('breed', ...) is)"
            )
        for sid, loss in losses.items():
            # (a float first: a study's every loss; the ABC's check is the slow one, and
            # this runs on the training thread at every reduction: issue 46's seventh round)
            if type(loss) is not float and (
                isinstance(loss, bool) or not isinstance(loss, numbers.Real)
            ):
                raise ValueError(f"the loss of simulation {sid} is not a number: {loss!r}")
        observed, skipped = 0, []
        pending, isfinite = self._losses, math.isfinite
        for sid, loss in losses.items():
            if sid not in records or not isfinite(loss):
                skipped.append(sid)
                continue
            pending.pop(sid, None)  # reported again: the newest again
            pending[sid] = float(loss)
            observed += 1
        return observed, skipped

    def apply(self, sampler: Sampler, records: Mapping[int, SimulationRecord]) -> dict[int, float]:
        """Give `sampler` the losses noted since the last call, with the parameters of
        their `records`, in the order they were noted (a no-op when none were); returns
        them (id -> loss, in that order)."""
        if not self._losses:
            return {}
        assert isinstance(sampler, AdaptiveSampler)  # (`note` checked it)
        for sid, loss in self._losses.items():
            sampler.observe(sid, records[sid].parameters, loss)
        applied, self._losses = self._losses, {}
        return applied

    def discard(self, ids: Iterable[int]) -> None:
        """Forget the losses of `ids` (simulations whose records are gone)."""
        for sid in ids:
            self._losses.pop(sid, None)

    def clear(self) -> None:
        """Forget every loss noted (the records were replaced)."""
        self._losses.clear()
