"""The warp a `DensitySampler` draws through (`LossWarp`, its base class): per varying
parameter, the design's marginal (uniform, or Beta(`edge`, `edge`)) mixed with the
high-loss density of the observations kept (`density_warp`'s functions), on the
parameters with the `evidence`; computed again only when the observations or the
options changed. The `density` module docstring says why and how a draw uses it.
Not thread-safe (the launcher's lock).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from melissa_trainer.launcher.density_state import DensityState
from melissa_trainer.launcher.density_warp import (
    UNIT_GRID,
    beta_cdf,
    detrended_log_losses,
    grid_gradient,
    high_loss_warp,
    loss_tilt_warp,
    trend_evidence,
)

__all__ = ["LossWarp"]


class LossWarp(DensityState):
    """The current warp of a `DensitySampler` (module docstring), which sets the
    attributes declared here."""

    share: float
    quantile: float
    bandwidth: float
    min_observations: int
    tilt: float | None
    evidence: float
    edge: float
    #: the varying parameters' columns (read-only; every draw reads them)
    _columns: np.ndarray
    #: per varying parameter, the pure high-loss density on the grid where the warp
    #: bends it (the parameters with the evidence), else None (`warp` sets it)
    _hard: list[np.ndarray | None]
    #: `warp`'s last result: (what it depends on, its warps, `_hard`)
    _warp_memo: tuple[Any, Any, tuple[np.ndarray | None, ...]] | None

    def warp(self) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """The current warp ``(cdf, grid)`` of each varying parameter: the design's
        marginal (uniform, or Beta(`edge`, `edge`)) mixed with the high-loss density
        (weight `share`, from `min_observations` observations on, on the parameters
        with the `evidence`); None when that is the identity. Its arrays are read-only.

        Computed again only when the observations or the options changed since the
        last call (`_computed_warp`, the plain path; the same arrays otherwise): a
        study draws about every other time with no loss observed in between (issue
        46's tenth round: half the draws of `surrogate_cost.py`'s study, half the
        sampler's CPU)."""
        key = (self._changes, self.share, self.quantile, self.bandwidth,
               self.min_observations, self.tilt, self.evidence, self.edge)  # fmt: skip
        memo = self._warp_memo
        if memo is None or memo[0] != key:
            warps = self._computed_warp()
            memo = self._warp_memo = (key, None if warps is None else tuple(warps),
                                      tuple(self._hard))  # fmt: skip
        self._hard = list(memo[2])
        return None if memo[1] is None else list(memo[1])

    def _computed_warp(self) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """`warp` computed from the observations kept (and `_hard` set)."""
        grid = UNIT_GRID
        base = self._marginal()
        width = len(self._columns)
        self._hard = [None] * width
        #: the varying parameters warped (their indices among `_columns`), in order
        warped: list[int] = []
        if self.share > 0.0 and len(self._losses) >= self.min_observations:
            ids = list(self._losses)  # oldest observation first
            points = self._points(ids)
            losses = np.array(list(self._losses.values()), dtype=np.float64)
            ages = np.array(ids, dtype=np.float64)
            scores = detrended_log_losses(losses, ages)
            if self.evidence > 0:  # without evidence of a trend: the design's marginal
                warped = np.flatnonzero(~(trend_evidence(points, scores) < self.evidence)).tolist()
            else:
                warped = list(range(width))
        if not warped:
            return None if self.edge == 1.0 else [(base, grid)] * width
        # the densities of the warped parameters only: the others' weigh 0, and each
        # column's is its own (issue 46: most of a draw's CPU, 12 columns)
        if self.tilt is not None:
            pure = loss_tilt_warp(points[:, warped], scores, self.bandwidth, self.tilt, 1.0)
        else:
            pure = high_loss_warp(points[:, warped], scores, self.quantile, self.bandwidth, 1.0)
        # a parameter not warped keeps the design's marginal as it is (read-only: the
        # same bits as 1 x base + 0 x density); a warped one mixes them with `share`
        share = self.share
        out: list[tuple[np.ndarray, np.ndarray]] = [(base, grid)] * width
        for j, (cdf, _) in zip(warped, pure, strict=True):
            # (`grid_gradient`: numpy.gradient's values, its coefficients computed once)
            hard = self._hard[j] = grid_gradient(cdf)
            mixed = (1.0 - share) * base + share * cdf
            hard.flags.writeable = mixed.flags.writeable = False  # (`warp` hands them again)
            out[j] = (mixed, grid)
        return out

    def _marginal(self) -> np.ndarray:
        """The design's marginal distribution function on `UNIT_GRID` (read-only, one
        array per `edge`: `warp` gives it as it is to every parameter it leaves alone)."""
        return UNIT_GRID if self.edge == 1.0 else beta_cdf(self.edge)

    def _points(self, ids: list[int]) -> np.ndarray:
        """The varying coordinates of the observations of `ids` (kept) in the unit cube,
        one row each. A simulation's parameters never change (`AdaptiveSampler.observe`
        refuses it), so its row is computed once and kept (`_units` is elementwise: the
        same values as computed with the others), for the observations still kept only."""
        rows = self._unit_rows
        new = [sid for sid in ids if sid not in rows]
        if new:
            parameters = self._parameters
            for sid, row in zip(new, self._units([parameters[sid] for sid in new]), strict=True):
                rows[sid] = row[self._varying]
        if len(rows) > len(ids):  # some left the window
            kept = set(ids)
            self._unit_rows = rows = {sid: row for sid, row in rows.items() if sid in kept}
        return np.array([rows[sid] for sid in ids], dtype=np.float64).reshape(
            len(ids), len(self._columns)
        )
