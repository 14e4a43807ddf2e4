"""The checkpoint half of `SimulationLosses` (`melissa_trainer.core.loss_per_simulation`).

A reduction's period boundaries belong to the statistic (its reference is made of
periods), so the statistics, the recent periods and each rank's unreduced samples are
part of a checkpoint: a resumed run reduces at the same steps, over the same samples, as
one never stopped. `SimulationLossesState` writes them as arrays (`state_dict`, saved
with safetensors), reads them back, checked (`load_state_dict`), and deals them to the
ranks of a resume on another number of ranks (`reshard_state`). `SimulationLosses`
inherits it and sets the attributes it reads.

Not thread-safe: the training thread only (as `SimulationLosses`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np

from melissa_trainer.core.period_losses import PeriodLosses

__all__ = ["SimulationLossesState"]


class SimulationLossesState:
    """The checkpoint methods of `SimulationLosses` (module docstring); its
    ``__init__`` sets the attributes."""

    _period: PeriodLosses
    _ids: np.ndarray
    _draws: np.ndarray
    _loss_sum: np.ndarray
    _relative_sum: np.ndarray
    _step: np.ndarray
    #: (sum, count) of the recent periods; its maxlen is `REFERENCE_PERIODS`
    _recent: deque[tuple[float, int]]

    def state_dict(self) -> dict[str, np.ndarray]:
        """The statistics (the same on every rank) and this rank's unreduced samples, as
        arrays (written with safetensors)."""
        unreduced_ids, unreduced = self._period.arrays()
        return {
            "ids": self._ids.copy(),
            "draws": self._draws.copy(),
            "loss_sum": self._loss_sum.copy(),
            "relative_sum": self._relative_sum.copy(),
            "step": self._step.copy(),
            "reference_sums": np.array([t for t, _ in self._recent], dtype=np.float64),
            "reference_counts": np.array([n for _, n in self._recent], dtype=np.int64),
            "unreduced_ids": unreduced_ids,
            "unreduced_losses": unreduced,
        }

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore `state_dict()` (replacing everything).

        Raises:
            ValueError: arrays missing, of different lengths, an id twice, negative draws.
        """
        names = ("ids", "draws", "loss_sum", "relative_sum", "step")
        others = ("unreduced_ids", "unreduced_losses", "reference_sums", "reference_counts")
        missing = [n for n in (*names, *others) if n not in state]
        if missing:
            raise ValueError(f"simulation losses in the checkpoint lack {missing}")
        columns = [np.asarray(state[n]) for n in names]
        if len({len(c) for c in columns}) != 1 or any(c.ndim != 1 for c in columns):
            raise ValueError("simulation losses in the checkpoint: columns of different lengths")
        ids = columns[0].astype(np.int64)
        if len(np.unique(ids)) != len(ids) or (columns[1] < 0).any():
            raise ValueError("simulation losses in the checkpoint: an id twice or negative draws")
        unreduced_ids = np.asarray(state["unreduced_ids"], dtype=np.int64)
        unreduced = np.asarray(state["unreduced_losses"], dtype=np.float64)
        if unreduced_ids.shape != unreduced.shape or unreduced.ndim != 1:
            raise ValueError("simulation losses in the checkpoint: unreduced ids and losses differ")
        order = np.argsort(ids, kind="stable")  # (the columns in increasing id order)
        self._ids = ids[order]
        self._draws = columns[1].astype(np.int64)[order]
        self._loss_sum = columns[2].astype(np.float64)[order]
        self._relative_sum = columns[3].astype(np.float64)[order]
        self._step = columns[4].astype(np.int64)[order]
        # the periods kept: `REFERENCE_PERIODS`, the maxlen `SimulationLosses` gives them
        periods = self._recent.maxlen
        assert periods is not None
        ref_sums = np.asarray(state["reference_sums"], dtype=np.float64)
        ref_counts = np.asarray(state["reference_counts"], dtype=np.int64)
        if ref_sums.shape != ref_counts.shape or len(ref_sums) > periods:
            raise ValueError("simulation losses in the checkpoint: malformed reference periods")
        self._recent = deque(
            zip(ref_sums.tolist(), ref_counts.tolist(), strict=True), maxlen=periods
        )
        self._period.load(unreduced_ids, unreduced)

    @staticmethod
    def reshard_state(
        states: Sequence[Mapping[str, np.ndarray]], rank: int, world_size: int
    ) -> dict[str, np.ndarray]:
        """Rank `rank`'s `state_dict()` after a resume on `world_size` ranks from a
        checkpoint of ``len(states)`` ranks (`states`, in old rank order). Pure.

        The statistics and reference periods are the same on every old rank: old rank
        0's are taken as they are. The unreduced samples are each old rank's own: old
        rank ``r``'s go whole to new rank ``r % world_size`` (in old rank order), so
        every one is reduced once at the next reduction, none lost, none twice (a
        reduction sums every rank's, whichever holds them).

        Raises:
            ValueError: no state, or old ranks whose statistics differ (the checkpoint's
                ranks did not reduce together: it cannot be resharded).
        """
        if not states:
            raise ValueError("no simulation losses to reshard")
        first = states[0]
        for old, state in enumerate(states[1:], start=1):
            for name in _SHARED:
                if not np.array_equal(np.asarray(state[name]), np.asarray(first[name])):
                    raise ValueError(
                        f"simulation losses of old ranks 0 and {old} differ in {name!r}: "
                        "the statistics must be the same on every rank"
                    )
        mine = [s for old, s in enumerate(states) if old % world_size == rank]
        out = {name: np.asarray(first[name]) for name in _SHARED}
        for name, dtype in (("unreduced_ids", np.int64), ("unreduced_losses", np.float64)):
            out[name] = np.concatenate([np.zeros(0, dtype), *(s[name] for s in mine)]).astype(dtype)
        return out


#: the arrays of `SimulationLosses.state_dict` that are the same on every rank
_SHARED = ("ids", "draws", "loss_sum", "relative_sum", "step", "reference_sums",
           "reference_counts")  # fmt: skip
