"""The shortcuts of `DensitySampler`'s draw and of `AdaptiveSampler.observe` (issue 46,
the acquisition's cost) give what the computations they replace give, bit for bit:
Beta's inverse distribution function without scipy.stats' checks, ranks by one sort,
the observations' unit points kept per simulation, a re-observation's parameters
checked once, the scores' reductions without the methods' wrappers, and the
observations made when read (issue 46's ninth round)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import betaincinv
from scipy.stats import beta

from melissa_trainer.launcher import DensitySampler
from melissa_trainer.launcher.adaptive import Observation
from melissa_trainer.launcher.density_warp import _ranks, detrended_log_losses, trend_evidence

BOX = {f"p{i}": (0.0, 10.0) for i in range(6)}
WIDE = {**{f"p{i}": (0.0, 10.0) for i in range(11)}, "fixed": (3.0, 3.0)}


def test_betaincinv_is_scipy_stats_beta_ppf() -> None:
    # `_sharpen` relies on it: the same draws as with beta.ppf (the code before)
    rng = np.random.default_rng(0)
    for e in [*rng.uniform(0.05, 3.0, 40), 0.25, 0.7, 1.0]:
        q = np.concatenate([rng.random(500), [0.0, 1.0, 1e-12, 1 - 1e-12]])
        assert np.array_equal(betaincinv(e, e, q), beta.ppf(q, e, e))


def test_ranks_are_the_inverse_of_the_sort_ties_included() -> None:
    rng = np.random.default_rng(1)
    columns = rng.integers(0, 5, (40, 7)).astype(np.float64)  # many ties
    ranks = _ranks(columns)
    assert ranks.dtype == np.float64
    assert np.array_equal(ranks, np.argsort(np.argsort(columns, axis=0), axis=0))


def test_the_points_kept_per_simulation_are_the_observations_unit_points() -> None:
    sampler = DensitySampler(WIDE, seed=2, window=6, min_observations=4, evidence=2.0)
    sampler.plan(30)
    varying = [k != "fixed" for k in WIDE]
    for i in range(20):
        p = sampler.draw()
        sampler.observe(i, p, 1.0 + p["p0"])
        if i % 3:  # the oldest kept, again: the newest now
            oldest = sampler.observations[0]
            sampler.observe(oldest.simulation_id, oldest.parameters, 2.0)
        kept = list(sampler.observations)
        points = sampler._points([o.simulation_id for o in kept])
        expected = sampler._units([o.parameters for o in kept])[:, varying]
        assert np.array_equal(points, expected)
        assert len(sampler._unit_rows) <= 6  # only the observations kept
    state = json.loads(json.dumps(sampler.state_dict()))
    resumed = DensitySampler(WIDE, seed=2, window=6, min_observations=4, evidence=2.0)
    resumed.load_state_dict(state)
    assert resumed.draw() == sampler.draw()


def test_a_re_observation_is_checked_as_a_first_one() -> None:
    sampler = DensitySampler(BOX, seed=0)
    first = {k: 1.0 + i for i, k in enumerate(BOX)}
    sampler.observe(3, first, 2.0)
    # equal parameters (numpy numbers): kept, as plain floats
    sampler.observe(3, {k: np.float64(v) for k, v in first.items()}, 4.0)
    (kept,) = sampler.observations
    assert kept.loss == 4.0 and kept.parameters == first
    assert all(type(v) is float for v in kept.parameters.values())
    with pytest.raises(ValueError, match="one simulation runs with one parameter set"):
        sampler.observe(3, {**first, "p0": 2.0}, 1.0)
    with pytest.raises(ValueError, match="loss of simulation 3"):
        sampler.observe(3, first, float("nan"))
    with pytest.raises(ValueError, match="simulation_id"):
        sampler.observe(-3, first, 1.0)
    assert sampler.observations == (kept,)


def test_a_re_observation_s_shortcut_keeps_what_the_checked_path_keeps() -> None:
    # a study's re-observations (kept simulation, its parameters, a float loss) skip the
    # checks made at its first observation: the same observations, order and window as
    # every observation made through the checks
    fast = DensitySampler(BOX, seed=0, window=5, min_observations=3, evidence=1.0)
    checked = DensitySampler(BOX, seed=0, window=5, min_observations=3, evidence=1.0)
    rng = np.random.default_rng(3)
    drawn: dict[int, dict[str, float]] = {}
    for i in range(40):
        sid = int(rng.integers(0, 8))
        if sid not in drawn:
            drawn[sid] = {k: float(v) for k, v in zip(BOX, rng.random(6), strict=True)}
        parameters = drawn[sid]
        loss = float(rng.random()) if i % 5 else np.float64(rng.random())  # numpy: checked
        fast.observe(sid, dict(parameters), loss)
        checked._observed_add(checked._observation(sid, dict(parameters), loss))
        assert fast.observations == checked.observations
        assert all(type(o.loss) is float for o in fast.observations)
    assert len(fast.observations) == 5
    kept = fast.observations[-1]
    with pytest.raises(ValueError, match="only finite losses"):
        fast.observe(kept.simulation_id, dict(kept.parameters), float("inf"))
    with pytest.raises(ValueError, match="one simulation runs with one parameter set"):
        fast.observe(kept.simulation_id, {**kept.parameters, "p0": 11.0 / 3}, 1.0)
    assert fast.observations == checked.observations


def plain_detrended_log_losses(losses: np.ndarray, ages: np.ndarray) -> np.ndarray:
    """`detrended_log_losses` as written before issue 46's ninth round (the methods
    `all`, `max`, `min`, `mean` and `sum`): the oracle of its direct reductions."""
    y = np.log(losses) if (losses > 0).all() else np.asarray(losses, dtype=np.float64)
    if ages.max() > ages.min():
        x = np.asarray(ages, dtype=np.float64)
        dx = x - x.mean()
        slope = (dx * (y - y.mean())).sum() / (dx * dx).sum()
        y = y - slope * x
    return y


def test_the_scores_direct_reductions_are_the_methods_bit_for_bit() -> None:
    # every length a window allows and more (numpy's pairwise sums change their blocking
    # at 8 and 128 terms), magnitudes from 1e-8 to 1e8, a loss <= 0, equal ages
    rng = np.random.default_rng(4)
    for n in [*range(1, 140), 255, 256, 257, 1000]:
        for _ in range(3):
            losses = np.exp(rng.uniform(-18.0, 18.0, n))
            if n > 2 and rng.random() < 0.2:
                losses[rng.integers(n)] = -rng.random()
            ages = np.sort(rng.choice(10 * n + 5, n, replace=False)).astype(np.float64)
            if rng.random() < 0.1:
                ages[:] = 3.0
            got, expected = (
                detrended_log_losses(losses, ages),
                plain_detrended_log_losses(losses, ages),
            )
            assert got.tobytes() == expected.tobytes(), n
            assert trend_evidence(ages[:, None], got).tobytes() == (
                trend_evidence(ages[:, None], expected).tobytes()
            )


def test_the_observations_made_when_read_follow_every_change() -> None:
    # the `Observation`s are made from the losses and parameters kept when read, after a
    # change (the view is dropped by every observation, fast or checked, and by a load):
    # never an older loss, order or window than the checked path's own
    fast = DensitySampler(BOX, seed=0, window=4, min_observations=3, evidence=1.0)
    rng = np.random.default_rng(5)
    expected: dict[int, tuple[dict[str, float], float]] = {}
    for i in range(60):
        sid = int(rng.integers(0, 7))
        parameters = {k: float(sid) + j / 10 for j, k in enumerate(BOX)}
        loss = float(rng.random())
        fast.observe(sid, dict(parameters), loss)
        expected.pop(sid, None)
        expected[sid] = (parameters, loss)
        while len(expected) > 4:
            del expected[next(iter(expected))]
        want = tuple(Observation(s, p, v) for s, (p, v) in expected.items())
        assert fast.observations == want and tuple(fast._observed.values()) == want
        if i % 7 == 0:  # a resumed sampler reads the same
            resumed = DensitySampler(BOX, seed=0, window=4, min_observations=3, evidence=1.0)
            resumed.load_state_dict(json.loads(json.dumps(fast.state_dict())))
            assert resumed.observations == want
