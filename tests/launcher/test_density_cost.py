"""The shortcuts of `DensitySampler`'s draw and of `AdaptiveSampler.observe` (issue 46,
the acquisition's cost) give what the computations they replace give, bit for bit:
Beta's inverse distribution function without scipy.stats' checks, ranks by one sort,
the observations' unit points kept per simulation, a re-observation's parameters
checked once."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import betaincinv
from scipy.stats import beta

from melissa_trainer.launcher import DensitySampler
from melissa_trainer.launcher.density_warp import _ranks

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
    sampler = DensitySampler(WIDE, seed=2, window=6, min_observations=4)
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
    resumed = DensitySampler(WIDE, seed=2, window=6, min_observations=4)
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
    fast = DensitySampler(BOX, seed=0, window=5, min_observations=2)
    checked = DensitySampler(BOX, seed=0, window=5, min_observations=2)
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
