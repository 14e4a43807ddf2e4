"""`BreedSampler.failed` (as `SurrogateSampler.failed`, the user trial of active
sampling): a simulation given up for good is no parent (its observation is dropped,
its later reports ignored) and a no-go zone of the bred draws
(`launcher.failed_zones`); the zones are in the state (an exact resume)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from melissa_trainer.launcher import BreedSampler

pytestmark = pytest.mark.timeout(120)

#: the trial's box: the solver fails (exit 1) for eps < 0.003, the corner of high loss
BOX = {"eps": (1e-3, 1e-1, "log"), "a": (0.0, 1.0)}
FAILED = ((1.02e-3, 0.2), (1.05e-3, 0.6), (1.3e-3, 0.9))
#: `BreedSampler`'s default `avoid`
AVOID = 0.1


def unit_eps(eps: float) -> float:
    return float(np.log(eps / 1e-3) / np.log(100.0))


def corner_sampler(**options: float) -> BreedSampler:
    """A breeding-only sampler that observed 12 simulations (eps >= 0.0032, losses
    low) and 3 in the small-eps corner whose first samples had by far the highest
    losses, then were given up for good (and reported again after)."""
    sampler = BreedSampler(BOX, seed=7, exploration=0.0, min_observations=4, **options)
    rng = np.random.default_rng(0)
    sid = 0
    for eps in np.geomspace(3.2e-3, 1e-1, 12):
        sampler.observe(sid, {"eps": float(eps), "a": float(rng.random())}, 1.0)
        sid += 1
    for eps, a in FAILED:
        parameters = {"eps": eps, "a": a}
        sampler.observe(sid, parameters, 1e6)  # its first samples: the worst loss
        sampler.failed(sid, parameters)
        sampler.observe(sid, parameters, 1e6)  # reported again: ignored
        sid += 1
    return sampler


def distance_to_failures(parameters: dict[str, float]) -> float:
    failed = np.array([[unit_eps(eps), a] for eps, a in FAILED])
    point = np.array([unit_eps(parameters["eps"]), parameters["a"]])
    return float(np.min(np.linalg.norm(failed - point, axis=1)))


def test_a_failed_simulation_is_no_parent_and_the_children_avoid_its_zone() -> None:
    sampler = corner_sampler()
    parents, draws = [], []
    for _ in range(40):
        draws.append(sampler.draw())
        parents.append(sampler.last_parent)
    assert None not in parents and not {12, 13, 14} & set(parents), parents
    assert min(distance_to_failures(p) for p in draws) >= AVOID, draws
    # on the successes' side of the boundary: at worst halfway to them
    assert min(p["eps"] for p in draws) > 1.5e-3, draws
    assert {o.simulation_id for o in sampler.observations} == set(range(12))
    assert sampler.failures == (12, 13, 14)


def test_wide_children_of_the_successes_next_to_the_corner_stay_out_of_its_zone() -> None:
    """sigma 0.3: children of the successes nearest the corner would land in the zone
    (with the zone check off, 5 of these 80 draws within `avoid`, 6 below eps
    1.5e-3); they are replaced by children outside it."""
    sampler = corner_sampler(sigma=0.3)
    draws = [sampler.draw() for _ in range(80)]
    assert min(distance_to_failures(p) for p in draws) >= AVOID, draws
    assert min(p["eps"] for p in draws) > 1.5e-3, draws


def test_without_failures_the_worst_losses_pull_the_breeding_into_the_corner() -> None:
    """The control: the same losses, nobody given up: the corner's parents weigh
    3x the others' and breed there."""
    sampler = BreedSampler(BOX, seed=7, exploration=0.0, min_observations=4)
    rng = np.random.default_rng(0)
    for sid, eps in enumerate(np.geomspace(3.2e-3, 1e-1, 12)):
        sampler.observe(sid, {"eps": float(eps), "a": float(rng.random())}, 1.0)
    for sid, (eps, a) in enumerate(FAILED, 12):
        sampler.observe(sid, {"eps": eps, "a": a}, 1e6)
    draws = [sampler.draw() for _ in range(40)]
    assert sum(distance_to_failures(p) < AVOID for p in draws) >= 5


def test_the_zones_are_in_the_state_and_a_resume_draws_the_same() -> None:
    sampler = corner_sampler(avoid=0.15)
    state = json.loads(json.dumps(sampler.state_dict()))
    assert [entry[0] for entry in state["zones"]] == [12, 13, 14]
    resumed = BreedSampler(BOX, seed=7, exploration=0.0, min_observations=4, avoid=0.15)
    resumed.load_state_dict(state)
    assert resumed.failures == sampler.failures
    assert [resumed.draw() for _ in range(8)] == [sampler.draw() for _ in range(8)]
    # a resumed study is not told again: a failed id's reports stay ignored
    resumed.observe(12, {"eps": 1.02e-3, "a": 0.2}, 1e6)
    assert 12 not in {o.simulation_id for o in resumed.observations}
    with pytest.raises(ValueError, match="avoid"):
        BreedSampler(BOX, seed=7, exploration=0.0, min_observations=4).load_state_dict(state)


def test_a_state_saved_before_the_zones_loads_and_draws_as_before() -> None:
    sampler = BreedSampler(BOX, seed=2, exploration=0.5, min_observations=2)
    for sid in range(3):
        sampler.observe(sid, sampler.draw(), float(sid))
    state = sampler.state_dict()
    assert "zones" not in state  # none without failures
    del state["avoid"]
    again = BreedSampler(BOX, seed=2, exploration=0.5, min_observations=2)
    again.load_state_dict(state)
    assert [again.draw() for _ in range(6)] == [sampler.draw() for _ in range(6)]


@pytest.mark.parametrize("bad", [{}, [[1]], [[1, [0.5]]], [[1, [0.1, 2.0]]], [[True, [0.1, 0.2]]]])
def test_a_malformed_zones_state_is_refused(bad: object) -> None:
    state = {**corner_sampler().state_dict(), "zones": bad}
    fresh = BreedSampler(BOX, seed=7, exploration=0.0, min_observations=4)
    with pytest.raises(ValueError, match="zones"):
        fresh.load_state_dict(state)
    assert fresh.position == 0 and not fresh.failures


def test_avoid_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="avoid"):
        BreedSampler(BOX, avoid=-0.1)
