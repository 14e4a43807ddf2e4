"""`LossPredictor`: the Gaussian-process regression of the observed losses that a
`SurrogateSampler` scores its acquisition candidates with (`launcher.surrogate`'s
docstring says what it models and why).

Its deviation conditions on every point drawn, up to ``memory`` (1000) plus ``window``
(100) of them: the Cholesky factor of their Gram matrix, solved against ``pool``
(1024) candidates per acquisition draw. That solve is triangular since 2026-12-05
(`STD_SOLVES`: "triangular"); until then it went through a general LU solve ("lu"),
which factors the triangular matrix again and solves twice: at 1,100 known points
about twice the time (docs/measured.md, "The loss predictor's solve"). The two round
differently (about 1e-14 on the deviation), and a study must draw after a resume what
it would have drawn without one, so the solve is part of the sampler's state: a state
saved before it was (no ``std_solve``) resumes with "lu", as it drew.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STD_SOLVES", "LossPredictor"]

#: how `LossPredictor.std` solves with the Cholesky factor: "triangular" (the default
#: since 2026-12-05), or "lu" (a general LU solve, every study's before)
STD_SOLVES = ("triangular", "lu")


class LossPredictor:
    """A Gaussian-process regression of standardised log losses over points of the unit
    cube (see the module docstring): `mean` from the observed points, `std` from every
    point drawn (`known`); `ages` (the points' launch order, optional): a linear trend
    of the loss in them is removed. `std_solve` (one of `STD_SOLVES`): how `std` solves
    with the Cholesky factor of the known points (a study's draws depend on it in the
    last bits: the sampler keeps it in its state). Built once per acquisition draw;
    numpy, and scipy for the triangular solve.

    Raises:
        ValueError: `std_solve` not one of `STD_SOLVES`.
    """

    def __init__(
        self,
        points: np.ndarray,
        losses: np.ndarray,
        known: np.ndarray,
        noise: float = 0.1,
        length: float = 1.0,
        ages: np.ndarray | None = None,
        std_solve: str = "triangular",
    ) -> None:
        if std_solve not in STD_SOLVES:
            raise ValueError(f"std_solve must be one of {STD_SOLVES}, not {std_solve!r}")
        self.std_solve = std_solve
        y = np.log(losses) if np.all(losses > 0) else np.asarray(losses, dtype=np.float64)
        if ages is not None and np.ptp(ages) > 0:  # the launch-order trend, removed
            design = np.stack([np.ones(len(ages)), np.asarray(ages, dtype=np.float64)], 1)
            coefficients = np.linalg.lstsq(design, y, rcond=None)[0]
            y = y - coefficients[1] * design[:, 1]
        spread = float(y.std())
        # a spread of rounding errors (equal losses, or a trend alone) is no signal:
        # standardised, it would be noise blown up to unit variance
        flat = spread <= 1e-9 * max(1.0, float(np.abs(y).max(initial=0.0)))
        self._y = np.zeros_like(y) if flat else (y - y.mean()) / spread
        self.noise = noise
        distances = _distances(points, points)
        upper = distances[np.triu_indices(len(points), k=1)]
        median = float(np.median(upper)) if upper.size else 1.0
        #: the kernel's length scale (unit-cube distance)
        self.scale = max(median, 1e-3) * length
        self._points, self._known = points, known
        self._alpha = np.linalg.solve(self._gram(points), self._y)
        self._known_factor = np.linalg.cholesky(self._gram(known))

    def _kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d = _distances(a, b)
        out: np.ndarray = np.exp(-0.5 * (d / self.scale) ** 2)
        return out

    def _gram(self, points: np.ndarray) -> np.ndarray:
        return self._kernel(points, points) + self.noise * np.eye(len(points))

    def mean(self, candidates: np.ndarray) -> np.ndarray:
        """The predicted standardised log loss at each candidate."""
        out: np.ndarray = self._kernel(candidates, self._points) @ self._alpha
        return out

    def std(self, candidates: np.ndarray) -> np.ndarray:
        """The predicted standard deviation at each candidate, given every known point."""
        factor, kernel = self._known_factor, self._kernel(self._known, candidates)
        if self.std_solve == "triangular":
            from scipy.linalg import solve_triangular  # (imported once, on first use)

            solved = solve_triangular(factor, kernel, lower=True, check_finite=False)
        else:  # every study's before 2026-12-05, kept for their resumes (module docstring)
            solved = np.linalg.solve(factor, kernel)
        out: np.ndarray = np.sqrt(np.clip(1.0 - np.sum(solved * solved, axis=0), 0.0, None))
        return out


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    squared = np.sum(a * a, 1)[:, None] + np.sum(b * b, 1)[None, :] - 2.0 * a @ b.T
    out: np.ndarray = np.sqrt(np.clip(squared, 0.0, None))
    return out
