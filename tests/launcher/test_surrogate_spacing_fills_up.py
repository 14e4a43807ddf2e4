"""User trial 31 (MEDIUM): the surrogate acquisition's `spacing` (default 0.1) is all or
nothing. Once no candidate keeps `spacing` from every draw remembered (a 1-D study after
about 10 draws, or a 2-D one after about 80), `_acquire` drops the constraint entirely
and the acquisitions pile onto the best-scored spot again: exact or near duplicates of
earlier simulations, the pile-up `spacing` exists to prevent (docs/concepts/study.md,
"The surrogate acquisition": "consecutive draws ... can pile onto one spot ...
`spacing=d` forbids it"). An expensive solver then runs the same parameters again.

Expected: when `spacing` cannot be kept, an acquisition still keeps as far from the
earlier draws as the candidates allow (e.g. the best-scored among the most-spaced
candidates, or a shrinking spacing), never a duplicate of an earlier draw."""

from __future__ import annotations

import numpy as np
import pytest

from melissa_trainer import make_sampler

pytestmark = pytest.mark.timeout(120)


def _acquisitions_min_distance(bounds: dict, n: int, loss) -> list[float]:
    """Each acquisition draw's distance (unit interval/square over the varying
    parameters) to the nearest earlier draw, the losses observed at once."""
    sampler = make_sampler("surrogate", bounds, seed=0)
    sampler.prepare()
    varying = [k for k, (lo, hi) in bounds.items() if hi > lo]
    points: list[np.ndarray] = []
    out: list[float] = []
    for i in range(n):
        before = sampler.acquired
        p = sampler.draw()
        u = np.array([(p[k] - bounds[k][0]) / (bounds[k][1] - bounds[k][0]) for k in varying])
        if sampler.acquired > before and points:
            out.append(float(min(np.linalg.norm(u - q) for q in points)))
        points.append(u)
        sampler.observe(i, p, loss(u))
    return out


@pytest.mark.xfail(
    strict=True,
    reason="trial31: spacing yields all at once; acquisitions duplicate earlier draws",
)
def test_one_varying_parameter_acquisitions_do_not_duplicate_draws() -> None:
    # nu fixed (zero width): one varying parameter, the loss highest at c's low bound
    bounds = {"nu": (0.01, 0.01), "c": (0.1, 1.0)}
    gaps = _acquisitions_min_distance(bounds, 20, lambda u: float(np.exp(-3 * u[0])) + 0.01)
    # observed: 0.0 (c = 0.1 drawn 3 times, 0.101 3 times)
    assert min(gaps) > 1e-3, gaps


@pytest.mark.xfail(
    strict=True,
    reason="trial31: spacing yields all at once; 2-D acquisitions past ~80 draws duplicate",
)
def test_two_parameters_many_draws_acquisitions_do_not_duplicate_draws() -> None:
    bounds = {"nu": (0.001, 0.02), "c": (0.1, 1.0)}
    gaps = _acquisitions_min_distance(
        bounds, 130, lambda u: float(np.exp(-u[0] / 0.15) * u[1]) + 0.01
    )
    # observed: 13 of 17 acquisitions of draws 121-159 within 0.01 of an earlier draw
    assert sum(g < 0.01 for g in gaps) == 0, sorted(gaps)[:10]
