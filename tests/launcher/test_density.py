"""`DensitySampler` (issue 46): unwarped it is the optimised Latin hypercube of the
budget (the "lhs" explorer's draws); warped, its draws lean to where the observed
losses are high on the parameter they depend on and stay flat on the others, the
launch-order trend is not a region, no region gets less than ``1 - share`` of its
uniform share; deterministic and resumable; bad options and states refused by name."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import DensitySampler, Launcher, make_sampler
from melissa_trainer.launcher.density_contrast import CONTRAST
from melissa_trainer.launcher.density_state import EDGE_BEFORE_CHECKED
from melissa_trainer.launcher.density_warp import detrended_log_losses, high_loss_warp
from melissa_trainer.launcher.exploration import Exploration

BOX = {f"p{i}": (0.0, 10.0) for i in range(6)}


def loss_of(parameters: dict[str, float]) -> float:
    """High only where p0 > 8 (a fifth of the range): the hard region."""
    return 10.0 if parameters["p0"] > 8.0 else 1.0


def run(
    sampler: DensitySampler, n: int, start: int = 0, loss: Any = loss_of
) -> list[dict[str, float]]:
    draws = []
    for i in range(start, start + n):
        p = sampler.draw()
        sampler.observe(i, p, loss(p))
        draws.append(p)
    return draws


@pytest.mark.parametrize("tilt", [None, 2.0])
def test_share_zero_is_the_optimised_latin_hypercube_of_the_budget(tilt: float | None) -> None:
    sampler = DensitySampler(BOX, seed=7, share=0.0, tilt=tilt, edge=1.0)
    sampler.plan(40)
    draws = np.array([[p[k] for k in BOX] for p in run(sampler, 40)]) / 10.0
    design = Exploration("lhs", 6, 7, np.ones(6, bool))
    design.plan(40)
    expected = np.array([design.draw() for _ in range(40)])
    np.testing.assert_allclose(draws, expected, atol=1e-12)
    assert sampler.warped == 0 and sampler.explored == 40
    # one point in each of the 40 strata of every parameter: a Latin hypercube
    assert all(len(set((draws[:, j] * 40).astype(int))) == 40 for j in range(6))


@pytest.mark.parametrize("tilt", [None, 2.0])
def test_warped_draws_lean_to_the_high_losses_on_their_parameter_only(tilt: float | None) -> None:
    shares, flat = [], []
    for seed in range(3):
        sampler = DensitySampler(BOX, seed=seed, share=0.7, tilt=tilt, contrast=None)
        sampler.plan(60)
        draws = run(sampler, 60)[sampler.min_observations :]
        assert sampler.warped == 60 - sampler.min_observations
        shares.append(np.mean([p["p0"] > 8.0 for p in draws]))
        flat.append(np.mean([p["p3"] > 8.0 for p in draws]))
        for p in draws:
            assert all(0.0 <= p[k] <= 10.0 for k in BOX)
    assert np.mean(shares) > 0.35  # the design's: 0.2
    assert 0.1 < np.mean(flat) < 0.3  # a parameter the loss ignores: about its 0.2


def test_no_region_gets_less_than_its_floor() -> None:
    rng = np.random.default_rng(0)
    points = rng.random((50, 2))
    scores = np.where(points[:, 0] > 0.8, 3.0, 0.0)
    (cdf, grid), _ = high_loss_warp(points, scores, 0.25, 0.05, share=0.6)
    # the probability of [0, 0.5]: at least (1 - share) x 0.5, nowhere below the floor
    assert np.interp(0.5, grid, cdf) >= 0.4 * 0.5 - 1e-9
    density = np.diff(cdf) / np.diff(grid)
    assert density.min() >= 0.4 - 1e-6


def test_the_launch_order_trend_is_not_a_region() -> None:
    ages = np.arange(30.0)
    grown = np.exp(0.2 * ages)
    np.testing.assert_allclose(np.ptp(detrended_log_losses(grown, ages)), 0.0, atol=1e-9)


def test_same_seed_same_draws_and_a_resume_continues_them() -> None:
    first, second = DensitySampler(BOX, seed=4), DensitySampler(BOX, seed=4)
    first.plan(48)
    second.plan(48)
    assert run(first, 30) == run(second, 30)
    state = json.loads(json.dumps(first.state_dict()))  # JSON, as a checkpoint holds it
    resumed = DensitySampler(BOX, seed=4)
    resumed.load_state_dict(state)
    assert resumed.warped == first.warped
    assert run(resumed, 18, start=30) == run(first, 18, start=30)


def test_a_launcher_plans_its_design() -> None:
    sampler = make_sampler("density", BOX, seed=3)
    assert isinstance(sampler, DensitySampler)
    Launcher(["true"], sampler, 12)
    run(sampler, 12)
    assert sampler._design.size == 12  # the budget, planned by the launcher


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"share": 1.5}, "share"),
        ({"quantile": 0.0}, "quantile"),
        ({"bandwidth": 0.0}, "bandwidth"),
        ({"tilt": -1.0}, "tilt"),
        ({"min_observations": 20, "window": 10}, "min_observations"),
        ({"kappa": 1.0}, "bad option for the 'density' sampler"),
    ],
)
def test_bad_options_are_refused_naming_them(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_sampler("density", BOX, seed=0, **options)


def test_a_state_of_other_options_or_a_bad_count_is_refused() -> None:
    sampler = DensitySampler(BOX, seed=0)
    sampler.plan(20)
    run(sampler, 15)
    state = sampler.state_dict()
    with pytest.raises(ValueError, match="share"):
        DensitySampler(BOX, seed=0, share=0.2).load_state_dict(state)
    with pytest.raises(ValueError, match="warped"):
        DensitySampler(BOX, seed=0).load_state_dict({**state, "warped": 99})
    fresh = DensitySampler(BOX, seed=0)
    with pytest.raises(ValueError, match="sampler state has an invalid warped count -1"):
        fresh.load_state_dict({**state, "warped": -1})
    assert fresh.position == 0 and not fresh.observations  # nothing changed


def test_a_state_of_another_edge_is_refused_one_saved_before_edge_was_checked_is_not() -> None:
    sampler = DensitySampler(BOX, seed=4, edge=0.5)
    sampler.plan(20)
    run(sampler, 12)
    state = json.loads(json.dumps(sampler.state_dict()))  # JSON, as a checkpoint holds it
    assert state["edge"] == 0.5
    fresh = DensitySampler(BOX, seed=4)  # the default edge, 0.7
    with pytest.raises(ValueError, match=r"edge=0\.5 but this sampler has edge=0\.7"):
        fresh.load_state_dict(state)
    assert fresh.position == 0 and not fresh.observations  # nothing changed
    again = DensitySampler(BOX, seed=4, edge=0.5)
    again.load_state_dict(state)
    assert again.draw() == sampler.draw()
    # a state written before edge was among the checked options has no "edge": it was
    # saved with the default (EDGE_BEFORE_CHECKED, 0.7), and resumes under it only
    default = DensitySampler(BOX, seed=4)
    default.plan(20)
    run(default, 12)
    old = {k: v for k, v in json.loads(json.dumps(default.state_dict())).items() if k != "edge"}
    assert EDGE_BEFORE_CHECKED == 0.7 == DensitySampler(BOX).edge
    resumed = DensitySampler(BOX, seed=4)
    resumed.load_state_dict(old)
    assert resumed.draw() == default.draw()
    with pytest.raises(ValueError, match=r"edge=0\.7 but this sampler has edge=1\.0"):
        DensitySampler(BOX, seed=4, edge=1.0).load_state_dict(old)


def test_evidence_leaves_a_parameter_the_loss_ignores_on_the_design() -> None:
    warped = DensitySampler(BOX, seed=2, share=0.7, evidence=3.0, contrast=None)
    plain = DensitySampler(BOX, seed=2, share=0.0)
    warped.plan(60)
    plain.plan(60)
    a, b = run(warped, 60), run(plain, 60)
    # p1..p5 do not move the loss: their coordinates are the design's, draw for draw
    assert all(x[k] == y[k] for x, y in zip(a, b, strict=True) for k in BOX if k != "p0")
    assert sum(x["p0"] != y["p0"] for x, y in zip(a, b, strict=True)) > 20  # p0 is warped
    assert np.mean([p["p0"] > 8.0 for p in a]) > np.mean([p["p0"] > 8.0 for p in b])


def test_edge_puts_more_of_the_design_near_the_bounds() -> None:
    sampler = DensitySampler(BOX, seed=0, share=0.0, edge=0.6)
    sampler.plan(50)
    draws = np.array([[p[k] for k in BOX] for p in run(sampler, 50)]) / 10.0
    near = np.mean((draws < 0.1) | (draws > 0.9))
    assert near > 0.26  # a Latin hypercube: 0.2; Beta(0.6, 0.6): 0.29
    # the design's points mapped through Beta(0.6, 0.6)'s quantiles: its distribution
    # function gives the design back (up to the tabulation), one point per stratum
    from scipy.stats import beta

    design = Exploration("lhs", 6, 0, np.ones(6, bool))
    design.plan(50)
    expected = np.array([design.draw() for _ in range(50)])
    np.testing.assert_allclose(beta.cdf(draws, 0.6, 0.6), expected, atol=0.01)


def test_the_design_is_computed_by_prepare_not_on_a_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    block = Exploration._block

    def counted(self: Exploration, number: int) -> np.ndarray:
        calls.append(number)
        return block(self, number)

    monkeypatch.setattr(Exploration, "_block", counted)
    sampler = DensitySampler(BOX, seed=1)
    sampler.plan(10)
    assert calls == []  # (a resume would replace it)
    sampler.prepare()
    assert calls == [0]  # the launcher's start pays it
    run(sampler, 10)
    assert calls == [0]  # no draw of the first design computes it again
    sampler.draw()
    assert calls == [0, 1]  # a longer study: the next design, on its first draw


def test_candidates_pick_the_design_s_points_farthest_from_the_draws() -> None:
    sampler = DensitySampler(BOX, seed=5, share=0.0, edge=1.0, candidates=30)
    sampler.plan(30)
    draws = np.array([[p[k] for k in BOX] for p in run(sampler, 30)]) / 10.0
    design = Exploration("lhs", 6, 5, np.ones(6, bool))
    design.plan(30)
    points = np.array([design.draw() for _ in range(30)])
    # the whole design, in another order (each pick the farthest unused point)
    np.testing.assert_allclose(np.sort(draws, axis=0), np.sort(points, axis=0), atol=1e-12)
    assert not np.allclose(draws, points)
    warped = DensitySampler(BOX, seed=5, share=0.7, candidates=30)
    warped.plan(30)
    for p in run(warped, 30):
        assert all(0.0 <= p[k] <= 10.0 for k in BOX)
    state = json.loads(json.dumps(warped.state_dict()))
    again = DensitySampler(BOX, seed=5, share=0.7, candidates=30)
    again.load_state_dict(state)
    assert again.draw() == warped.draw()


def ramp(parameters: dict[str, float]) -> float:
    """Rising with p0 only: from about 10 observations on, the evidence warps p0 alone."""
    return float(np.exp(parameters["p0"]))


def test_contrast_pushes_only_the_high_loss_draws_to_the_other_bounds() -> None:
    plain = DensitySampler(BOX, seed=6, share=0.7, contrast=None)
    sharp = DensitySampler(BOX, seed=6, share=0.7, contrast=0.3)
    plain.plan(60)
    sharp.plan(60)
    a, b = run(plain, 60, loss=ramp), run(sharp, 60, loss=ramp)
    others = [k for k in BOX if k != "p0"]
    hard = 0
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x["p0"] == y["p0"]  # the warped parameter: the same draws
        if i <= 10:  # p0 not warped yet (too few observations for the evidence)
            assert x == y
        elif y["p0"] < 4.0:  # far from the high losses (the top quarter of p0): the
            # design's marginal, up to the 256-point tabulation of the plain warp
            assert all(abs(x[k] - y[k]) < 0.02 for k in others)
        elif y["p0"] > 8.5:  # deep in them: every other parameter nearer its bounds
            hard += 1
            assert all(abs(y[k] - 5.0) >= abs(x[k] - 5.0) - 1e-9 for k in others)
            assert sum(abs(y[k] - 5.0) > abs(x[k] - 5.0) + 0.05 for k in others) >= 3
    assert hard >= 10
    state = json.loads(json.dumps(sharp.state_dict()))
    with pytest.raises(ValueError, match="contrast"):
        DensitySampler(BOX, seed=6, share=0.7, contrast=None).load_state_dict(state)
    again = DensitySampler(BOX, seed=6, share=0.7, contrast=0.3)
    again.load_state_dict(state)
    assert again.draw() == sharp.draw()


def test_contrast_changes_nothing_before_the_loss_warp() -> None:
    plain = DensitySampler(BOX, seed=8, contrast=None)
    sharp = DensitySampler(BOX, seed=8, contrast=0.3)
    plain.plan(20)
    sharp.plan(20)
    n = plain.min_observations
    assert run(plain, n) == run(sharp, n)  # no observation yet on the first draws
    with pytest.raises(ValueError, match="contrast"):
        DensitySampler(BOX, seed=0, contrast=0.0)


def test_contrast_auto_is_on_above_six_varying_parameters_only() -> None:
    assert DensitySampler(BOX).contrast is None  # six: the second round's default
    wider = {**BOX, "p6": (0.0, 1.0), "fixed": (2.0, 2.0)}
    assert DensitySampler(wider).contrast == CONTRAST == 0.25  # seven varying
    assert DensitySampler(wider, contrast=None).contrast is None
    with pytest.raises(ValueError, match="contrast='sharp'"):
        DensitySampler(BOX, contrast="sharp")


@pytest.mark.parametrize("tilt", [None, 2.0])
@pytest.mark.parametrize("evidence", [3.0, 0.0])
def test_the_warp_is_every_parameter_s_mixture_computed_in_full(
    tilt: float | None, evidence: float
) -> None:
    """The warp computes the high-loss density of the warped parameters only (issue 46:
    the draw's cost): it must equal, bit for bit, the mixture of every parameter's
    density with its share (0 without evidence), spelled out here from the parts."""
    from scipy.stats import beta

    from melissa_trainer.launcher.density_warp import GRID, loss_tilt_warp, trend_evidence

    rng = np.random.default_rng(3)
    sampler = DensitySampler(BOX, seed=3, share=0.6, tilt=tilt, evidence=evidence, edge=0.7)
    sampler.plan(40)
    for i in range(30):  # the loss depends on p0 and p4, not on the others
        p = sampler.draw()
        sampler.observe(i, p, float(np.exp(p["p0"] / 3 - p["p4"] / 4 + rng.normal(0, 0.1))))
    kept = sampler.observations
    points = np.array([[o.parameters[k] / 10.0 for k in BOX] for o in kept])
    ages = np.array([o.simulation_id for o in kept], dtype=np.float64)
    scores = detrended_log_losses(np.array([o.loss for o in kept]), ages)
    if tilt is None:
        full = high_loss_warp(points, scores, sampler.quantile, sampler.bandwidth, 1.0)
    else:
        full = loss_tilt_warp(points, scores, sampler.bandwidth, tilt, 1.0)
    shares = np.where(trend_evidence(points, scores) < evidence, 0.0, 0.6)
    assert 0 < np.count_nonzero(shares) < (6 if evidence else 7)  # some warped, some not
    grid = np.linspace(0.0, 1.0, GRID)
    base = beta.cdf(grid, 0.7, 0.7)
    warps = sampler.warp()
    assert warps is not None and len(warps) == 6
    for (cdf, g), (density_cdf, _), w in zip(warps, full, shares, strict=True):
        assert np.array_equal(g, grid)
        assert np.array_equal(cdf, (1.0 - w) * base + w * density_cdf)


def test_units_are_each_parameter_set_s_unit_point() -> None:
    sampler = DensitySampler({**BOX, "fixed": (2.0, 2.0)}, seed=0)
    rng = np.random.default_rng(0)
    sets = [{**{k: float(v) for k, v in zip(BOX, rng.uniform(0, 10, 6), strict=True)},
             "fixed": 2.0} for _ in range(9)]  # fmt: skip
    rows = sampler._units(sets)
    assert rows.shape == (9, 7)
    for row, parameters in zip(rows, sets, strict=True):
        expected = [parameters[k] / 10.0 for k in BOX] + [0.0]
        assert np.array_equal(row, np.array(expected))  # exact: (v - 0) / 10 either way
    assert sampler._units([]).shape == (0, 7)
