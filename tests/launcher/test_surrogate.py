"""`SurrogateSampler` (issue 46): deterministic and resumable, its exploration share,
its acquisition drawn where the observed losses are high (against the share a uniform
draw would put there), the launch-order trend of the losses not taken for a region, the
running draws counted as known, and bad options and states refused by name."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import Launcher, SurrogateSampler, make_sampler
from melissa_trainer.launcher.loss_predictor import LossPredictor

BOX = {f"p{i}": (0.0, 10.0) for i in range(6)}


def loss_of(parameters: dict[str, float]) -> float:
    """High only where p0 > 8 (a fifth of the range): the hard region."""
    return 10.0 if parameters["p0"] > 8.0 else 1.0


def run(sampler: SurrogateSampler, n: int, start: int = 0) -> list[dict[str, float]]:
    """`n` draws, each observed at once with `loss_of`."""
    draws = []
    for i in range(start, start + n):
        p = sampler.draw()
        sampler.observe(i, p, loss_of(p))
        draws.append(p)
    return draws


def test_same_seed_and_observations_same_draws_and_a_resume_continues_them() -> None:
    first, second = SurrogateSampler(BOX, seed=4), SurrogateSampler(BOX, seed=4)
    assert run(first, 30) == run(second, 30)
    assert run(SurrogateSampler(BOX, seed=5), 30) != run(SurrogateSampler(BOX, seed=4), 30)
    state = json.loads(json.dumps(first.state_dict()))  # JSON, as a checkpoint holds it
    resumed = SurrogateSampler(BOX, seed=4)
    resumed.load_state_dict(state)
    assert resumed.acquired == first.acquired and resumed.explored == first.explored
    assert run(resumed, 10, start=30) == run(first, 10, start=30)


def test_the_exploration_share() -> None:
    explore = SurrogateSampler(BOX, seed=1, exploration=1.0)
    run(explore, 30)
    assert explore.acquired == 0 and explore.explored == 30
    greedy = SurrogateSampler(BOX, seed=1, exploration=0.0, min_observations=5)
    run(greedy, 30)
    assert greedy.explored == 5 and greedy.acquired == 25  # explores until 5 are kept
    half = SurrogateSampler(BOX, seed=1)
    run(half, 108)
    assert 0.35 < half.acquired / (108 - 8) < 0.65  # 100 draws of a fair coin


def test_acquisition_draws_go_where_the_losses_are_high() -> None:
    sampler = SurrogateSampler(BOX, seed=2, exploration=0.0)
    draws = run(sampler, 60)[sampler.min_observations :]
    share = np.mean([p["p0"] > 8.0 for p in draws])
    assert share > 0.5  # a uniform draw: 0.2
    for p in draws:  # inside the bounds, every parameter
        assert all(0.0 <= p[k] <= 10.0 for k in BOX)


def test_a_fixed_parameter_stays_at_its_value() -> None:
    box = {**BOX, "fixed": (3.0, 3.0)}
    sampler = SurrogateSampler(box, seed=0, exploration=0.0)
    draws = []
    for i in range(20):
        p = sampler.draw()
        sampler.observe(i, p, loss_of(p))
        draws.append(p)
    assert {p["fixed"] for p in draws} == {3.0}


def test_the_launch_order_trend_is_not_a_region() -> None:
    rng = np.random.default_rng(0)
    points = rng.random((40, 3))
    ages = np.arange(40.0)
    grown = np.exp(0.1 * ages)  # the loss grows with the launch order alone
    known = points
    trended = LossPredictor(points, grown, known, ages=ages)
    naive = LossPredictor(points, grown, known)
    candidates = rng.random((500, 3))
    # without the trend removed, the latest draws' neighbourhood looks worst
    assert np.ptp(naive.mean(candidates)) > 1.0
    assert np.ptp(trended.mean(candidates)) < 1e-6


def test_a_running_draw_is_known() -> None:
    rng = np.random.default_rng(1)
    points = rng.random((10, 2))
    losses = rng.random(10) + 1.0
    running = np.array([[0.9, 0.1]])
    alone = LossPredictor(points, losses, points)
    counted = LossPredictor(points, losses, np.concatenate([points, running]))
    # a point known (noise 0.1): at most the deviation of one noisy observation there
    assert alone.std(running)[0] > 0.4
    assert counted.std(running)[0] <= (0.1 / 1.1) ** 0.5 + 1e-9


def test_a_launcher_drives_it_and_its_checkpoint_carries_it() -> None:
    sampler = make_sampler("surrogate", BOX, seed=3)
    assert isinstance(sampler, SurrogateSampler)
    launcher = Launcher(["true"], sampler, 12)
    for i in range(12):
        sampler.observe(i, sampler.draw(), 1.0 + i % 3)
    state = json.loads(json.dumps(launcher.state_dict()))
    assert state  # the launcher's checkpoint, the sampler's state in it
    again = make_sampler("surrogate", BOX, seed=3)
    again.load_state_dict(sampler.state_dict())
    assert again.draw() == sampler.draw()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"exploration": 1.5}, "exploration"),
        ({"kappa": -1.0}, "kappa"),
        ({"noise": 0.0}, "noise"),
        ({"length": float("nan")}, "length"),
        ({"pool": 0}, "pool"),
        ({"min_observations": 20, "window": 10}, "min_observations"),
        ({"memory": 0}, "memory"),
        ({"sigma": 0.1}, "bad option for the 'surrogate' sampler"),
    ],
)
def test_bad_options_are_refused_naming_them(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_sampler("surrogate", BOX, seed=0, **options)


def test_a_state_of_other_options_or_a_bad_count_is_refused() -> None:
    sampler = SurrogateSampler(BOX, seed=0)
    run(sampler, 15)
    state = sampler.state_dict()
    with pytest.raises(ValueError, match="kappa"):
        SurrogateSampler(BOX, seed=0, kappa=2.0).load_state_dict(state)
    with pytest.raises(ValueError, match="acquired"):
        SurrogateSampler(BOX, seed=0).load_state_dict({**state, "acquired": state["acquired"] + 1})
    breed = make_sampler("breed", BOX, seed=0)
    with pytest.raises(ValueError, match="kind"):
        breed.load_state_dict(state)
    fresh = SurrogateSampler(BOX, seed=0)
    with pytest.raises(ValueError, match="sampler state has an invalid acquired count -1"):
        fresh.load_state_dict({**state, "acquired": -1})
    assert fresh.position == 0 and not fresh.observations  # nothing changed
