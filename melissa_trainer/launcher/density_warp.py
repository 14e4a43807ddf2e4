"""The high-loss density of a `DensitySampler` (issue 46): from the observed
simulations' positions in the unit cube and their losses, one monotone warp per
parameter, tabulated on a grid of `GRID` points of [0, 1].

- `detrended_log_losses`: the scores (log losses, the linear trend in launch order
  removed: a simulation launched late has been trained on less, wherever it ran);
- `trend_evidence`: per parameter, whether the scores depend on it (a rank
  correlation, about a standard normal's magnitude where they do not);
- `high_loss_warp`: the Gaussian kernel density of the top scores' positions
  (reflected at the bounds), or `loss_tilt_warp`: ``exp(tilt x`` a kernel regression
  of the scores ``)``; each mixed with the uniform and given as its tabulated
  distribution function ``(cdf, grid)``;
- `beta_cdf`: the design's marginal Beta(edge, edge), tabulated once per `edge`.

Pure functions of their arguments (numpy, and scipy for Beta's distribution); thread-
safe. Cost: O(observations x `GRID`) per warped parameter (docs/measured.md, issue 46).
A draw calls them once each, on tens of observations: their cost is numpy's per-call
overhead more than arithmetic, so what depends on the grid alone (its steps, the
coefficients of `numpy.gradient` on it) is computed once, and the ranks' means and
spreads, exact in floating point, are not summed (issue 46's seventh round: the same
values bit for bit, `tests/launcher/test_density_replay.py`).
"""

from __future__ import annotations

import functools

import numpy as np

from melissa_trainer.launcher.sampler_options import top_count

__all__ = [
    "GRID",
    "UNIT_GRID",
    "beta_cdf",
    "detrended_log_losses",
    "grid_gradient",
    "high_loss_warp",
    "loss_tilt_warp",
    "trend_evidence",
]

#: points of the grid each parameter's density and distribution are tabulated on
GRID = 256
#: the grid itself, [0, 1] (read-only: every warp and draw reads it)
UNIT_GRID = np.linspace(0.0, 1.0, GRID)
UNIT_GRID.flags.writeable = False


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


#: the grid as a column (the kernels' rows) and its steps (`numpy.diff`: not all equal
#: in floating point)
_GRID_COLUMN = _frozen(UNIT_GRID[:, None].copy())
_STEPS = _frozen(np.diff(UNIT_GRID))
_UNIFORM = bool((np.diff(_STEPS) == 0).all())
#: `numpy.gradient(f, UNIT_GRID)`'s interior coefficients (its non-uniform spacing's
#: formula, ``a f[:-2] + b f[1:-1] + c f[2:]``), computed as it computes them
_DX1, _DX2 = _STEPS[:-1], _STEPS[1:]
_GRAD_A = _frozen(-(_DX2) / (_DX1 * (_DX1 + _DX2)))
_GRAD_B = _frozen((_DX2 - _DX1) / (_DX1 * _DX2))
_GRAD_C = _frozen(_DX1 / (_DX2 * (_DX1 + _DX2)))


#: the reductions of 1-D arrays that the methods `all`, `max`, `min` and `sum` make
_ALL, _MAX, _MIN, _SUM = np.logical_and.reduce, np.maximum.reduce, np.minimum.reduce, np.add.reduce


def detrended_log_losses(losses: np.ndarray, ages: np.ndarray) -> np.ndarray:
    """The log losses (the losses themselves when one is <= 0) minus their least-squares
    linear trend in `ages` (the simulations' launch order)."""
    # (the ufuncs' reductions called directly: what the methods `all`, `max`, `min`,
    # `sum` and `mean` call, without their Python wrappers, a draw's main cost here;
    # a mean is the sum divided by the count, as `mean` computes it: issue 46's ninth
    # round, tested against the methods)
    y = np.log(losses) if _ALL(losses > 0) else np.asarray(losses, dtype=np.float64)
    if _MAX(ages) > _MIN(ages):  # (ptp > 0)
        # the least-squares slope in closed form, by numpy's own reductions: LAPACK's
        # `lstsq` (and BLAS's dot products) sum in an order that depends on the kernel
        # OpenBLAS picks for the CPU, so the same study's scores, and its draws with
        # `tilt`, differed from one machine to another in the last bits
        x = np.asarray(ages, dtype=np.float64)
        n = len(x)
        dx = x - _SUM(x) / n
        slope = _SUM(dx * (y - _SUM(y) / n)) / _SUM(dx * dx)
        y = y - slope * x
    return y


@functools.lru_cache(maxsize=8)
def beta_cdf(edge: float) -> np.ndarray:
    """The distribution function of Beta(edge, edge) on the `GRID` points of [0, 1]
    (scipy's; read-only, computed once per `edge`: a scipy call costs about 80
    microseconds, and every draw needs it)."""
    from scipy.stats import beta  # scipy: already the samplers' (qmc)

    out: np.ndarray = beta.cdf(UNIT_GRID, edge, edge)
    out.flags.writeable = False
    return out


def trend_evidence(points: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per column of `points`, |Spearman's rank correlation with `scores`| x sqrt(n - 1):
    about a standard normal's magnitude where the scores do not depend on the column."""
    n = len(scores)
    if n < 3 or not _MAX(scores) > _MIN(scores):  # (ptp == 0)
        return np.zeros(points.shape[1])
    # Every column of ranks is a permutation of 0 .. n-1 (ties in order), so its mean is
    # (n - 1) / 2 and its sum of squared deviations the same for every column, exactly:
    # the deviations are multiples of 1/2, their squares and products multiples of 1/4,
    # far below 2^52, so every sum of them is exact whatever its order (the same values
    # as summing them, issue 46's seventh round; `_ranks` makes them exact integers).
    centre = (n - 1) / 2.0
    a = _ranks(points) - centre
    b = _ranks(scores[:, None])[:, 0] - centre
    spread = float(b @ b)
    rho = (b @ a) / np.sqrt(spread * spread)
    out: np.ndarray = np.abs(rho) * np.sqrt(n - 1)
    return out


def _ranks(columns: np.ndarray) -> np.ndarray:
    """Each entry's rank in its column (0 the least; ties in order), as float64: the
    inverse of the sorting permutation, by one sort and a scatter (what
    ``argsort(argsort(x))`` gives, with one sort fewer)."""
    order = np.argsort(columns, axis=0)
    ranks = np.empty(columns.shape, dtype=np.float64)
    # (`put_along_axis`'s scatter, without its index building)
    ranks[order, np.arange(columns.shape[1])] = np.arange(len(columns), dtype=np.float64)[:, None]
    return ranks


def high_loss_warp(
    points: np.ndarray, scores: np.ndarray, quantile: float, bandwidth: float, share: float
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per column of `points` (observed positions in [0, 1]), the tabulated inverse
    distribution ``(cdf, grid)`` of ``(1 - share) + share x`` the kernel density of the
    positions whose `scores` are in the top `quantile` (at least two of them): map a
    unit coordinate ``u`` with ``np.interp(u, cdf, grid)``."""
    count = top_count(quantile, len(scores))  # (the count `checked_quantile` checks)
    top = points[np.argsort(-scores, kind="stable")[:count]]
    warps = []
    for column in top.T:
        # the kernels reflected at 0 and 1, so that no mass leaves the range
        centres = np.concatenate([column, -column, 2.0 - column])
        z = (_GRID_COLUMN - centres) / bandwidth
        density = np.exp(-0.5 * z * z).sum(axis=1)
        density /= _trapezoid(density)
        warps.append(_inverse(UNIT_GRID, (1.0 - share) + share * density))
    return warps


def loss_tilt_warp(
    points: np.ndarray, scores: np.ndarray, bandwidth: float, tilt: float, share: float
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Like `high_loss_warp`, with the density of each column ``exp(tilt x z(x))``
    (normalised), ``z`` the kernel regression (Nadaraya-Watson, bandwidth `bandwidth`)
    of the standardised `scores` on the column: every observation weighs, and a
    parameter the loss does not depend on gets a nearly flat density."""
    spread = float(scores.std())
    z_scores = (scores - scores.mean()) / spread if spread > 0 else np.zeros_like(scores)
    grid = UNIT_GRID
    warps = []
    for column in points.T:
        z = (grid[:, None] - column[None, :]) / bandwidth
        weights = np.exp(-0.5 * z * z) + 1e-12
        # numpy's own reduction, not `weights @ z_scores`: a matrix-vector product is
        # BLAS's, whose summation order depends on the kernel OpenBLAS picks for the CPU
        # (three different draws on one machine under OPENBLAS_CORETYPE): the same
        # study would draw differently on another machine
        profile = (weights * z_scores).sum(axis=1) / weights.sum(axis=1)
        density = np.exp(tilt * (profile - profile.max()))
        density /= _trapezoid(density)
        warps.append(_inverse(grid, (1.0 - share) + share * density))
    return warps


def _trapezoid(density: np.ndarray) -> float:
    """``numpy.trapezoid(density, UNIT_GRID)``: its very operations, the grid's steps
    computed once."""
    total: float = (_STEPS * (density[1:] + density[:-1]) / 2.0).sum()
    return total


def _inverse(grid: np.ndarray, density: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distribution function of `density` on `grid` (`UNIT_GRID`), normalised."""
    steps = 0.5 * (density[1:] + density[:-1]) * _STEPS
    cdf = np.empty(len(grid))
    cdf[0] = 0.0
    np.cumsum(steps, out=cdf[1:])
    return cdf / cdf[-1], grid


def grid_gradient(values: np.ndarray) -> np.ndarray:
    """``numpy.gradient(values, UNIT_GRID)`` (the derivative of a function tabulated on
    the grid: second order inside, first at the ends), by its very operations, its
    coefficients computed once."""
    out = np.empty_like(values)
    if _UNIFORM:  # (not the case of the 256 points' linspace: kept for another GRID)
        out[1:-1] = (values[2:] - values[:-2]) / (2.0 * _STEPS[0])
    else:
        out[1:-1] = _GRAD_A * values[:-2] + _GRAD_B * values[1:-1] + _GRAD_C * values[2:]
    out[0] = (values[1] - values[0]) / _STEPS[0]
    out[-1] = (values[-1] - values[-2]) / _STEPS[-1]
    return out
