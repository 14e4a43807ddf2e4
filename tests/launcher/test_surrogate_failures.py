"""`SurrogateSampler.failed` (the user trial of active sampling, HIGH): a simulation
given up for good makes a no-go zone of the acquisition (`launcher.failed_zones`), its
loss no longer steers the predictor, a replacement does not land next to it, and the
zones are in the state (an exact resume)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from melissa_trainer.launcher import SurrogateSampler
from melissa_trainer.launcher.failed_zones import FailedZones

pytestmark = pytest.mark.timeout(120)

#: the trial's box: the solver fails (exit 1) for eps < 0.003, the corner of high loss
BOX = {"eps": (1e-3, 1e-1, "log"), "a": (0.0, 1.0)}
FAILS_BELOW = 3e-3


def loss_of(parameters: dict[str, float]) -> float:
    """Highest toward small eps (the boundary layer the surrogate learns worst)."""
    return float(1.0 / parameters["eps"])


def unit_eps(eps: float) -> float:
    return float(np.log(eps / 1e-3) / np.log(100.0))


def corner_sampler(**options: float) -> SurrogateSampler:
    """A sampler that has observed 12 simulations spread over the box (those at
    eps >= 0.003 finished) and been told that 3 in the small-eps corner failed for
    good, after their first samples were observed with the highest losses."""
    sampler = SurrogateSampler(BOX, seed=7, exploration=0.0, min_observations=4, **options)
    rng = np.random.default_rng(0)
    sid = 0
    for eps in np.geomspace(3.2e-3, 1e-1, 12):
        parameters = {"eps": float(eps), "a": float(rng.random())}
        sampler.observe(sid, parameters, loss_of(parameters))
        sid += 1
    for eps, a in ((1.02e-3, 0.2), (1.05e-3, 0.6), (1.3e-3, 0.9)):
        parameters = {"eps": eps, "a": a}
        sampler.observe(sid, parameters, loss_of(parameters))  # its first samples
        sampler.failed(sid, parameters)
        sampler.observe(sid, parameters, loss_of(parameters))  # reported again: ignored
        sid += 1
    return sampler


def near_a_failure(parameters: dict[str, float], radius: float) -> bool:
    failed = np.array([[unit_eps(1.02e-3), 0.2], [unit_eps(1.05e-3), 0.6], [unit_eps(1.3e-3), 0.9]])
    point = np.array([unit_eps(parameters["eps"]), parameters["a"]])
    return bool(np.min(np.linalg.norm(failed - point, axis=1)) < radius)


def test_the_next_draws_avoid_the_failed_corner() -> None:
    sampler = corner_sampler()
    draws = [sampler.draw() for _ in range(12)]
    assert sampler.acquired == 12
    assert not any(near_a_failure(p, sampler.avoid) for p in draws), draws
    # nearer to a success (eps >= 3.2e-3) than to a failure: at worst halfway from the
    # failures to the successes (the boundary is not known better: some draws there
    # may fail, and move the zones up)
    assert min(p["eps"] for p in draws) > 1.5e-3, draws
    assert sum(p["eps"] < FAILS_BELOW for p in draws) <= 4, draws
    assert sampler.failures == (12, 13, 14)
    assert {o.simulation_id for o in sampler.observations} == set(range(12))


def test_without_failures_the_acquisition_goes_to_the_corner() -> None:
    """The control: the same losses, nobody given up: the corner is where it aims (the
    draws above, with failures: none below eps 1.5e-3; spaced 0.1 apart by default)."""
    sampler = corner_losses()
    assert sum(sampler.draw()["eps"] < 1.5e-3 for _ in range(12)) >= 3


def test_an_exploration_replacement_is_not_next_to_a_failure() -> None:
    sampler = SurrogateSampler({"x": (0.0, 1.0), "y": (0.0, 1.0)}, seed=1, exploration=1.0)
    first = sampler.draw()
    sampler.failed(0, first)
    for _ in range(20):
        p = sampler.draw()
        d = np.hypot(p["x"] - first["x"], p["y"] - first["y"])
        assert d >= sampler.avoid, (first, p)


def test_the_zones_are_in_the_state_and_a_resume_draws_the_same() -> None:
    sampler = corner_sampler(avoid=0.15)
    state = json.loads(json.dumps(sampler.state_dict()))
    assert [entry[0] for entry in state["failed"]] == [12, 13, 14]
    resumed = SurrogateSampler(BOX, seed=7, exploration=0.0, min_observations=4, avoid=0.15)
    resumed.load_state_dict(state)
    assert resumed.failures == sampler.failures
    assert [resumed.draw() for _ in range(5)] == [sampler.draw() for _ in range(5)]
    # a resumed study is not told again: a failed id's reports stay ignored
    resumed.observe(12, {"eps": 1.02e-3, "a": 0.2}, 1e6)
    assert 12 not in {o.simulation_id for o in resumed.observations}


def test_a_state_saved_before_failures_were_kept_loads() -> None:
    sampler = SurrogateSampler(BOX, seed=2, spacing=0.0)  # (none then)
    sampler.draw()
    state = sampler.state_dict()
    del state["avoid"], state["failed"], state["spacing"]
    again = SurrogateSampler(BOX, seed=2, spacing=0.0)
    again.load_state_dict(state)
    assert again.draw() == sampler.draw()
    with pytest.raises(ValueError, match="pass spacing=0.0 to resume it"):
        SurrogateSampler(BOX, seed=2).load_state_dict(state)


def test_the_default_spacing_keeps_acquisitions_apart_and_a_state_of_the_old_one_says_so() -> None:
    """spacing 0.1 by default since 2026-12-02 (the A/B in docs/measured.md); a state of
    the default before (spacing 0) is refused with the option that resumes it."""
    sampler = corner_losses()
    assert sampler.spacing == 0.1
    assert closest_pair([sampler.draw() for _ in range(8)]) >= 0.1
    old = corner_losses(spacing=0.0)
    old.draw()
    with pytest.raises(ValueError, match=r"spacing=0\.0 but .* pass spacing=0\.0 to resume"):
        corner_losses().load_state_dict(old.state_dict())


@pytest.mark.parametrize(
    "bad", [{}, [[1]], [[1, [0.5]]], [["x", [0.1, 0.2]]], [[1, [0.1, 2.0]]], [[True, [0.1, 0.2]]]]
)
def test_a_malformed_failed_state_is_refused(bad: object) -> None:
    sampler = corner_sampler()
    state = {**sampler.state_dict(), "failed": bad}
    fresh = SurrogateSampler(BOX, seed=7, exploration=0.0, min_observations=4)
    with pytest.raises(ValueError, match="failed"):
        fresh.load_state_dict(state)
    assert fresh.position == 0 and not fresh.failures


def test_avoid_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="avoid"):
        SurrogateSampler(BOX, avoid=-0.1)


def test_zones_rule() -> None:
    zones = FailedZones(1, 0.1)
    zones.add(5, np.array([0.0]))
    zones.add(5, np.array([0.0]))  # told twice: once
    known = np.array([[0.0], [0.6]])  # the failure itself, and a success
    candidates = np.array([[0.05], [0.2], [0.35], [0.5]])
    assert zones.allowed(candidates, known).tolist() == [False, False, True, True]
    assert zones.choose(candidates, np.array([9.0, 8.0, 1.0, 2.0]), known) == 3
    # all banned: the farthest from the failures
    assert zones.choose(candidates[:2], np.array([9.0, 8.0]), known) == 1
    assert len(zones) == 1


def unit_of(parameters: dict[str, float]) -> np.ndarray:
    return np.array([unit_eps(parameters["eps"]), parameters["a"]])


def corner_losses(**options: float) -> SurrogateSampler:
    """15 simulations observed, their loss highest in the small-eps corner; nobody
    given up; acquisitions only."""
    sampler = SurrogateSampler(BOX, seed=7, exploration=0.0, min_observations=4, **options)
    rng = np.random.default_rng(0)
    for sid, eps in enumerate(np.geomspace(1.02e-3, 1e-1, 15)):
        parameters = {"eps": float(eps), "a": float(rng.random())}
        sampler.observe(sid, parameters, loss_of(parameters))
    return sampler


def closest_pair(draws: list[dict[str, float]]) -> float:
    units = np.stack([unit_of(p) for p in draws])
    d = np.linalg.norm(units[:, None] - units[None], axis=2)
    return float(d[np.triu_indices(len(units), 1)].min())


def test_the_deviation_alone_lets_running_draws_pile_onto_a_corner() -> None:
    """What the docs say happens by default (the trial: 12 acquisitions at eps
    1.000-1.067e-3): draws made before any of their losses came in crowd together."""
    sampler = corner_losses(spacing=0.0)  # (the default before 2026-12-02)
    draws = [sampler.draw() for _ in range(8)]
    assert closest_pair(draws) < 0.05, draws


def test_spacing_keeps_the_acquisitions_apart() -> None:
    sampler = corner_losses(spacing=0.05)
    draws = [sampler.draw() for _ in range(8)]
    assert sampler.acquired == 8
    assert closest_pair(draws) >= 0.05, draws
    # the same state, the same draws (spacing is in the state, checked on load)
    again = corner_losses(spacing=0.05)
    again.load_state_dict(json.loads(json.dumps(sampler.state_dict())))
    assert again.draw() == sampler.draw()
    with pytest.raises(ValueError, match="spacing"):
        corner_losses().load_state_dict(sampler.state_dict())
