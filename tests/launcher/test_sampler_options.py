"""The adaptive samplers' options that are in range yet meaningless
(`launcher.sampler_options`): each is refused when the sampler is built, by the
constructor and `make_sampler` alike, naming the option and the fix; the values at the
edge that mean something are accepted. Each refusal's reason is checked by an oracle
apart from the check: what the sampler's own code does with the value."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.breeding import reflected as _reflected
from melissa_trainer.launcher.density_warp import high_loss_warp, loss_tilt_warp, trend_evidence
from melissa_trainer.launcher.loss_predictor import LossPredictor
from melissa_trainer.launcher.sampler_options import uniform_within

pytestmark = pytest.mark.timeout(60)

BOX = {"a": (0.0, 1.0), "b": (0.0, 1.0)}


@pytest.mark.parametrize(
    ("kind", "options", "match"),
    [
        ("surrogate", {"min_observations": 1}, r"min_observations=1 .*give min_observations >= 3"),
        ("surrogate", {"min_observations": 2}, r"min_observations=2 .*launch order"),
        ("surrogate", {"pool": 1}, r"pool=1 .*give pool >= 2"),
        ("density", {"min_observations": 2}, r"min_observations=2 .*give min_observations >= 3"),
        ("density", {"quantile": 1.0}, r"quantile=1 takes all 100 observations .*at most 0.99"),
        ("density", {"quantile": 0.995}, r"quantile=0.995 .*whatever their losses"),
        (
            "density",
            {"quantile": 0.9, "window": 8, "evidence": 2},
            r"quantile=0.9 takes all 8 .*at most 0.875",
        ),
        ("density", {"quantile": 1.0, "window": None}, r"quantile=1 .*give a quantile below 1"),
        ("density", {"tilt": 0.0}, r"tilt=0 .*give tilt > 0"),
        ("density", {"evidence": 10.0}, r"evidence=10 can never be reached with window=100"),
        ("density", {"window": 8}, r"evidence=3 .*window=8.*sqrt\(8 - 1\) = 2.65"),
        ("breed", {"sigma": 1.5}, r"sigma=1.5 .*give sigma <= 1"),
    ],
)
def test_a_meaningless_option_is_refused_naming_it(
    kind: str, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        make_sampler(kind, BOX, seed=0, **options)


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        ("surrogate", {"min_observations": 3, "window": 3, "exploration": 0.0, "kappa": 0.0}),
        ("surrogate", {"pool": 2, "exploration": 1.0}),
        ("density", {"min_observations": 3, "quantile": 1e-6, "share": 0.0}),
        ("density", {"quantile": 0.875, "window": 8, "evidence": 2.6}),
        ("density", {"quantile": 0.99, "window": None, "evidence": 100.0}),
        # the quantile, the evidence: unread where nothing warps (share 0) or with tilt
        ("density", {"quantile": 1.0, "window": 8, "share": 0.0}),
        ("density", {"quantile": 1.0, "tilt": 0.5}),
        ("breed", {"min_observations": 1, "sigma": 1.0, "exploration": 0.0}),
    ],
)
def test_the_values_at_the_edge_that_mean_something_are_accepted(
    kind: str, options: dict[str, Any]
) -> None:
    sampler = make_sampler(kind, BOX, seed=0, **options)
    sampler.plan(4)
    assert len(sampler.draw()) == 2


def test_two_losses_give_the_surrogate_a_flat_prediction() -> None:
    """Why `min_observations` >= 3: two losses, however different, minus their trend
    in launch order, are equal; the predicted loss is 0 everywhere. Three are not."""
    rng = np.random.default_rng(0)
    grid = rng.random((50, 2))
    points = np.array([[0.1, 0.2], [0.8, 0.9], [0.5, 0.1]])
    losses, ages = np.array([1.0, 100.0, 3.0]), np.array([0.0, 1.0, 2.0])
    two = LossPredictor(points[:2], losses[:2], points[:2], ages=ages[:2])
    assert np.all(two.mean(grid) == 0.0)
    three = LossPredictor(points, losses, points, ages=ages)
    assert np.ptp(three.mean(grid)) > 0.1


def test_the_density_s_loss_blind_cases() -> None:
    """Why the density's refusals: below 3 losses there is no evidence; the top of
    every observation (quantile 1) is the same density whatever the losses; tilt 0 is
    the uniform."""
    rng = np.random.default_rng(1)
    points = rng.random((8, 2))
    assert np.all(trend_evidence(points[:2], np.array([1.0, 5.0])) == 0.0)
    low, high = np.arange(8.0), np.arange(8.0)[::-1]
    for a, b in zip(high_loss_warp(points, low, 1.0, 0.1, 1.0),
                    high_loss_warp(points, high, 1.0, 0.1, 1.0), strict=True):  # fmt: skip
        np.testing.assert_array_equal(a[0], b[0])
    for cdf, grid in loss_tilt_warp(points, low, 0.1, 0.0, 1.0):
        np.testing.assert_allclose(cdf, grid, atol=1e-12)


def test_a_child_bred_with_sigma_above_1_is_uniform_whatever_its_parent() -> None:
    """Why `sigma` <= 1: the bound `uniform_within` says, against children drawn with
    Breed's own reflection (a histogram of 400,000 per parent, 10 bins)."""
    assert uniform_within(1.0) < 0.015 and uniform_within(0.15) > 1.0
    rng = np.random.default_rng(2)
    for parent in (0.0, 0.5, 0.9):
        children = _reflected(parent + rng.normal(0.0, 1.0, 400_000))
        share = np.histogram(children, bins=10, range=(0.0, 1.0))[0] / 40_000
        assert np.abs(share - 1.0).max() < 0.015 + 0.02  # (the bound, plus 4 sampling stds)
        narrow = _reflected(parent + rng.normal(0.0, 0.15, 400_000))
        assert np.abs(np.histogram(narrow, bins=10, range=(0.0, 1.0))[0] / 40_000 - 1).max() > 0.5


@pytest.mark.parametrize(
    ("kind", "valid", "old"),
    [
        ("surrogate", {"min_observations": 3}, {"min_observations": 2}),
        ("density", {"quantile": 0.25}, {"quantile": 1.0}),
        ("breed", {"sigma": 1.0}, {"sigma": 3.0}),
    ],
)
def test_a_state_saved_with_a_refused_value_is_refused_naming_it(
    kind: str, valid: dict[str, Any], old: dict[str, Any]
) -> None:
    """A checkpoint of a study run before the refusal (its state holding the old value,
    written here into a valid one's) does not resume quietly with the valid value."""
    sampler = make_sampler(kind, BOX, seed=0, **valid)
    sampler.plan(4)
    sampler.draw()
    state = {**sampler.state_dict(), **old}
    name = next(iter(old))
    again = make_sampler(kind, BOX, seed=0, **valid)
    again.plan(4)
    with pytest.raises(ValueError, match=name):
        again.load_state_dict(state)
