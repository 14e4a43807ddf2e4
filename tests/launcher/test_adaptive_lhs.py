"""BreedSampler's "lhs" exploration: the exploration draws are the points of a Latin
hypercube of the planned budget, optimised for its centred discrepancy. Checked against
scipy (the design's points, their strata), through exact resumes mid-design and across
designs, and a state saved by main's code before the explorer existed still loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import qmc
from test_adaptive import BOUNDS

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.exploration import LHS_BLOCK
from melissa_trainer.launcher.study_change import StudyChanged, check_resume
from melissa_trainer.launcher.study_record import StudyRecord

#: a fixed parameter beside BOUNDS: the design spans the varying ones only
FIXED_BOUNDS = {**BOUNDS, "f": (3.0, 3.0)}
LOW = np.array([low for low, _ in BOUNDS.values()])
SPAN = np.array([high - low for low, high in BOUNDS.values()])
MAIN_STATE = Path(__file__).parents[1] / "data" / "breed_state_435f1c2.json"


def lhs(seed: int = 0, **options: Any) -> BreedSampler:
    return BreedSampler(FIXED_BOUNDS, seed, **{"explorer": "lhs", **options})


def unit(drawn: dict[str, float]) -> np.ndarray:
    return (np.array([drawn[n] for n in BOUNDS]) - LOW) / SPAN


def run(sampler: Any, start: int, stop: int) -> list[dict[str, float]]:
    """Draws `start` to `stop`, each observed at once (id = its index, loss: the first
    parameter / 100, t0 / 100 for BOUNDS)."""
    out = []
    for i in range(start, stop):
        drawn = sampler.draw()
        out.append(drawn)
        sampler.observe(i, drawn, next(iter(drawn.values())) / 100.0)
    return out


def strata(points: np.ndarray, n: int) -> list[list[int]]:
    """Per dimension, the sorted strata (of `n`) the points fall in."""
    return [sorted(np.floor(points[:, d] * n).astype(int).tolist()) for d in range(points.shape[1])]


@pytest.mark.parametrize("candidates", [1, 16])
def test_exploring_alone_hands_out_the_whole_optimised_design(candidates: int) -> None:
    sampler = lhs(seed=4, exploration=1.0, candidates=candidates)
    sampler.plan(48)
    drawn = run(sampler, 0, 48)
    points = np.array([unit(d) for d in drawn])
    assert strata(points, 48) == [list(range(48))] * 3  # one point in every stratum
    assert {d["f"] for d in drawn} == {3.0}
    # the very points of scipy's optimised hypercube, seeded [seed, 31, block 0]
    rng = np.random.default_rng([4, 31, 0])
    design = qmc.LatinHypercube(3, optimization="random-cd", rng=rng).random(48)
    assert np.allclose(np.sort(points, axis=0), np.sort(design, axis=0), atol=1e-9)
    assert sorted(map(tuple, np.round(points, 9))) == sorted(map(tuple, np.round(design, 9)))
    in_order = [tuple(np.round(p, 9)) for p in points] == [tuple(np.round(p, 9)) for p in design]
    assert in_order == (candidates == 1)  # gap-filling picks another order


def test_gap_filling_picks_the_farthest_of_the_first_unused_points() -> None:
    sampler = lhs(seed=1, exploration=1.0, candidates=5)
    sampler.plan(30)
    design = qmc.LatinHypercube(
        3, optimization="random-cd", rng=np.random.default_rng([1, 31, 0])
    ).random(30)
    unused, seen = list(range(30)), []
    for i in range(30):
        point = unit(run(sampler, i, i + 1)[0])
        first = unused[:5]
        if seen:  # the oracle: maximin over the first 5 unused points, the first of equals
            gaps = [min(np.linalg.norm(design[j] - s) for s in seen) for j in first]
            expected = first[int(np.argmax(gaps))]
        else:
            expected = first[0]
        assert np.allclose(point, design[expected], atol=1e-9)
        unused.remove(expected)
        seen.append(point)


def test_a_longer_budget_is_explored_by_consecutive_designs() -> None:
    sampler = lhs(seed=2, exploration=1.0, candidates=4)
    sampler.plan(10)
    points = np.array([unit(d) for d in run(sampler, 0, 25)])
    for block in (points[:10], points[10:20]):
        assert strata(block, 10) == [list(range(10))] * 3
    assert not np.allclose(np.sort(points[:10], 0), np.sort(points[10:20], 0))
    unplanned = lhs(seed=2, exploration=1.0)
    first = np.array([unit(d) for d in run(unplanned, 0, LHS_BLOCK)])
    assert strata(first, LHS_BLOCK) == [list(range(LHS_BLOCK))] * 3


@pytest.mark.parametrize(("plan", "cut"), [(48, 0), (48, 1), (48, 21), (10, 10), (10, 17)])
def test_a_resumed_sampler_makes_the_draws_of_the_uninterrupted_one(plan: int, cut: int) -> None:
    def fresh() -> BreedSampler:
        sampler = lhs(seed=9, exploration=0.6, min_observations=4)
        sampler.plan(plan)
        return sampler

    whole = run(fresh(), 0, 48)
    first = fresh()
    before = run(first, 0, cut)
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint holds it
    resumed = fresh()
    resumed.load_state_dict(state)
    assert before + run(resumed, cut, 48) == whole
    assert any(d != w for d, w in zip(run(lhs(seed=10), 0, 48), whole, strict=True))


@pytest.mark.parametrize("cut", [10, 20])
def test_a_state_saved_when_its_whole_design_was_drawn_resumes(cut: int) -> None:
    """Exploring alone, a study that drew its whole planned design (the usual checkpoint
    after the last simulation started) resumes: its state was refused before (its
    `used` holds the whole design, ``explored % size`` is 0)."""

    def fresh() -> BreedSampler:
        sampler = lhs(seed=4, exploration=1.0)
        sampler.plan(10)
        return sampler

    whole = run(fresh(), 0, 30)
    first = fresh()
    before = run(first, 0, cut)
    resumed = fresh()
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert before + run(resumed, cut, 30) == whole


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"used": [0, 0]}, "design points used"),
        ({"used": [0]}, "design points used"),
        ({"used": [0, 99]}, "design points used"),
        ({"used": "01"}, "design points used"),
        ({"size": 0}, "invalid design size"),
        ({"size": True}, "invalid design size"),
        ({"size": None}, "invalid design size"),
        ({"position": 3}, "position 3 for 2 draws"),
    ],
)
def test_a_malformed_design_state_is_refused_and_changes_nothing(
    change: dict[str, Any], match: str
) -> None:
    sampler = lhs(seed=3, exploration=1.0)
    sampler.plan(20)
    run(sampler, 0, 2)
    state = sampler.state_dict()
    state["exploration_state"] = {**state["exploration_state"], **change}
    target = lhs(seed=3, exploration=1.0)
    target.plan(20)
    before = target.state_dict()
    with pytest.raises(ValueError, match=match):
        target.load_state_dict(state)
    assert target.state_dict() == before


def test_a_state_of_another_explorer_is_refused_naming_it() -> None:
    sampler = lhs(seed=3)
    run(sampler, 0, 3)
    with pytest.raises(ValueError, match="explorer='lhs' but this sampler has explorer='sobol'"):
        BreedSampler(FIXED_BOUNDS, 3, explorer="sobol").load_state_dict(sampler.state_dict())


def test_make_sampler_builds_it() -> None:
    sampler = make_sampler("breed", FIXED_BOUNDS, seed=0, explorer="lhs", exploration=1.0)
    sampler.plan(8)
    points = np.array([unit(sampler.draw()) for _ in range(8)])
    assert strata(points, 8) == [list(range(8))] * 3


def test_a_state_saved_by_main_before_the_lhs_explorer_resumes_with_its_draws() -> None:
    saved = json.loads(MAIN_STATE.read_text())
    sampler = BreedSampler(
        BOUNDS, 3, exploration=0.5, window=6, min_observations=3, explorer="sobol",
        candidates=16, memory=1000, sigma=0.15, floor=0.5,
    )  # fmt: skip
    sampler.plan(20)
    sampler.load_state_dict(saved["state"])
    assert run(sampler, 9, 14) == saved["after"]


def test_main_s_state_in_a_sampler_of_other_options_is_refused_saying_which() -> None:
    saved = json.loads(MAIN_STATE.read_text())["state"]
    sampler = BreedSampler(BOUNDS, 3, window=6, min_observations=3)  # today's exploration 1.0
    with pytest.raises(ValueError, match="exploration=0.5 but this sampler has exploration=1.0"):
        sampler.load_state_dict(saved)
    sampler = BreedSampler(BOUNDS, 3, exploration=0.5, window=6, min_observations=3,
                           explorer="lhs")  # fmt: skip
    with pytest.raises(ValueError, match="explorer='sobol' but this sampler has explorer='lhs'"):
        sampler.load_state_dict(saved)


@pytest.mark.parametrize(("explorer", "refused"), [("sobol", False), ("lhs", True)])
def test_a_study_exploring_a_latin_hypercube_of_its_size_cannot_grow_on_resume(
    explorer: str, refused: bool
) -> None:
    def study(n: int) -> StudyRecord:
        sampler = BreedSampler(FIXED_BOUNDS, 1, explorer=explorer, exploration=0.5)
        sampler.plan(n)  # as the launcher does
        return StudyRecord(sampler, n, max_restarts=0, on_failure="raise", max_redraws=0,
                           first_simulation_id=0)  # fmt: skip

    first = study(6)
    for _ in range(2):
        first.take(0.0)
    state = json.loads(json.dumps(first.state_dict()))
    check_resume(state, study(6))  # the same size: resumes
    if refused:  # an "lhs" design of 6 points
        with pytest.raises(StudyChanged, match="changed from 6 to 8, but Breed explores a Latin"):
            check_resume(state, study(8))
    else:  # the Sobol' sequence, which continues exactly
        check_resume(state, study(8))
