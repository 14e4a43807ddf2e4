"""BreedSampler's gap-filling exploration (``candidates=K``): each exploration draw is
the one of the next K points of the Sobol' sequence farthest from every earlier draw."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from test_adaptive import BOUNDS, study

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.sampler_base import qmc_engine

LOW = np.array([low for low, _ in BOUNDS.values()])
SPAN = np.array([high - low for low, high in BOUNDS.values()])


def gapfill(seed: int = 0, **options: Any) -> BreedSampler:
    options = {"min_observations": 5, "candidates": 8, "exploration": 0.7, **options}
    return BreedSampler(BOUNDS, seed, **options)  # breeding (its default only explores)


def unit(drawn: dict[str, float]) -> np.ndarray:
    return (np.array(list(drawn.values())) - LOW) / SPAN


def test_the_same_seed_and_observations_give_the_same_draws() -> None:
    first = study(gapfill(seed=7), 150)
    assert first == study(gapfill(seed=7), 150)
    assert first != study(gapfill(seed=8), 150)
    plain = study(gapfill(seed=7, candidates=1), 150)
    assert first[0] == plain[0]  # nothing drawn yet: the first candidate
    assert first[1] != plain[1]


@pytest.mark.parametrize(
    ("cut", "memory"), [(0, 1000), (7, 1000), (60, 1000), (60, 12), (130, 100), (130, None)]
)
def test_a_resumed_sampler_continues_the_same_draws(cut: int, memory: int | None) -> None:
    options = {"exploration": 0.6, "window": 20, "memory": memory}
    reference = study(gapfill(seed=3, **options), cut + 80)
    sampler = gapfill(seed=3, **options)
    drawn = study(sampler, cut)
    state = json.loads(json.dumps(sampler.state_dict(), sort_keys=True))
    assert len(state["exploration_state"]["drawn"]) == min(cut, memory or cut)
    resumed = gapfill(seed=3, **options)
    resumed.load_state_dict(state)
    assert resumed.explored == sampler.explored
    assert study(resumed, 80, drawn=drawn)[cut:] == reference[cut:]


def test_each_exploration_draw_is_the_candidate_farthest_from_every_earlier_draw() -> None:
    """Recomputed here by brute force from scipy's sequence of the same seed, over the
    varying parameters only (a fixed one is no distance)."""
    k, bounds = 8, {**BOUNDS, "fixed": (2.0, 2.0)}
    sampler = BreedSampler(bounds, 4, exploration=0.5, min_observations=3, candidates=k)
    sequence = qmc_engine("Sobol", len(bounds), 4, scramble=True)
    earlier: list[np.ndarray] = []
    explored = 0
    for index in range(60):
        drawn = sampler.draw()
        point = unit({name: drawn[name] for name in BOUNDS})
        if sampler.last_parent is None:
            candidates = sequence.random(k)[:, :3]
            gaps = [min((np.linalg.norm(c - e) for e in earlier), default=0.0) for c in candidates]
            np.testing.assert_allclose(point, candidates[int(np.argmax(gaps))], atol=1e-12)
            assert earlier or np.allclose(point, candidates[0], atol=1e-12)
            explored += 1
        earlier.append(point)
        sampler.observe(index, drawn, drawn["t0"])
    assert sampler.explored == explored and 20 <= explored < 60  # both kinds were drawn


def test_gap_filling_leaves_smaller_holes_around_clustered_bred_draws() -> None:
    """Bred draws cluster near the worst simulations (t0 high): the points of the box
    far from every draw (the 90th percentile of that distance, over a grid) are nearer
    when the explorations fill the gaps (by 3-8% on these seeds)."""
    grid = np.stack(np.meshgrid(*[np.linspace(0, 1, 11)] * 3), axis=-1).reshape(-1, 3)

    def holes(candidates: int, seed: int) -> float:
        sampler = gapfill(seed, candidates=candidates, exploration=0.4, sigma=0.05)
        points = np.array([unit(d) for d in study(sampler, 60)])
        nearest = np.min(np.linalg.norm(grid[:, None] - points, axis=2), axis=1)
        return float(np.quantile(nearest, 0.9))

    for seed in range(4):
        assert holes(8, seed) < holes(1, seed)


@pytest.mark.parametrize(("memory", "n"), [(10, 25), (100, 90), (100, 250), (None, 250)])
def test_the_memory_keeps_the_newest_draws_only(memory: int | None, n: int) -> None:
    sampler = gapfill(seed=1, memory=memory)
    drawn = study(sampler, n)
    remembered = sampler.state_dict()["exploration_state"]["drawn"]
    kept = drawn[-memory:] if memory else drawn
    np.testing.assert_allclose(remembered, [unit(d) for d in kept], atol=1e-12)
    assert gapfill(candidates=1).state_dict()["exploration_state"]["drawn"] == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"candidates": 0}, "candidates must be a positive int"),
        ({"candidates": 2.5}, "candidates must be a positive int"),
        ({"candidates": True}, "candidates must be a positive int"),
        ({"memory": 0}, "memory must be a positive int"),
        ({"explorer": "grid"}, "explorer must be one of"),
    ],
)
def test_bad_options_are_refused_naming_them(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_sampler("breed", BOUNDS, **{"candidates": 8, **options})


def test_a_state_of_other_options_or_malformed_is_refused_and_changes_nothing() -> None:
    sampler = gapfill(seed=2)
    study(sampler, 20)
    state = json.loads(json.dumps(sampler.state_dict()))
    for other, key in [(gapfill(seed=2, candidates=4), "candidates="),
                       (gapfill(seed=2, candidates=1), "candidates="),
                       (gapfill(seed=2, memory=50), "memory=")]:  # fmt: skip
        with pytest.raises(ValueError, match=key):
            other.load_state_dict(state)
    exploration = state["exploration_state"]
    for bad, match in [
        ({"drawn": [[0.5, 0.5]]}, "malformed point"),
        ({"drawn": [[0.5, 1.5, 0.5]]}, "malformed point"),
        ({"drawn": [[0.5, "x", 0.5]]}, "malformed point"),
        ({"drawn": None}, "no list of drawn points"),
        ({"position": exploration["position"] + 1}, "saved with other candidates"),
        ({"explored": -1}, "invalid explored"),
        ({"engine": "halton"}, "engine='halton'"),
    ]:
        fresh = gapfill(seed=2)
        before = fresh.state_dict()
        with pytest.raises(ValueError, match=match):
            fresh.load_state_dict({**state, "exploration_state": {**exploration, **bad}})
        assert fresh.state_dict() == before
    small = gapfill(seed=2, memory=5)
    with pytest.raises(ValueError, match="over memory"):
        small.load_state_dict({**state, "memory": 5})
