"""Why the surrogate acquisition's 12-parameter figures do not move with `spacing`
(docs/measured.md, "The surrogate acquisition at 12 parameters, spacing 0.1"): in the
heat benchmark's wide space, 48 draws are so far apart (the closest pair about 0.4 of
the unit cube and more) that no pool candidate an acquisition takes comes within 0.1
of a draw: with spacing 0.1 (the default since 2026-12-02) it draws exactly what it drew
with 0, the default of every 12-parameter run recorded before. In 3 dimensions the
same study's draws crowd (the closest pair about 0.01), and the spacing changes them."""

from __future__ import annotations

import numpy as np
import pytest

from melissa_trainer.launcher import SurrogateSampler


def hard_region_loss(parameters: dict[str, float]) -> float:
    """High where p0 is in its top seventh (the benchmark's hard region's share), a
    gentle slope in p1 elsewhere."""
    return 1.0 + 10.0 * (parameters["p0"] > 6.0 / 7.0) + parameters["p1"]


def draws(dims: int, seed: int, spacing: float) -> list[dict[str, float]]:
    """The 48 draws of a study whose every draw is observed at once."""
    sampler = SurrogateSampler({f"p{i}": (0.0, 1.0) for i in range(dims)}, seed, spacing=spacing)
    out = []
    for i in range(48):
        p = sampler.draw()
        sampler.observe(i, p, hard_region_loss(p))
        out.append(p)
    return out


def closest_pair(points: list[dict[str, float]]) -> float:
    x = np.array([list(p.values()) for p in points])
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    np.fill_diagonal(d, np.inf)
    return float(d.min())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("seed", [3000, 3001, 3002])
def test_at_12_parameters_spacing_01_draws_what_0_drew(seed: int) -> None:
    without = draws(12, seed, 0.0)
    assert closest_pair(without) > 0.3  # far beyond 0.1: the spacing cannot bind
    assert draws(12, seed, 0.1) == without


@pytest.mark.timeout(120)
def test_at_3_parameters_the_spacing_changes_the_draws() -> None:
    """The control: where the draws crowd, the same comparison tells them apart."""
    without = draws(3, 3000, 0.0)
    assert closest_pair(without) < 0.1
    assert draws(3, 3000, 0.1) != without
