"""BreedSampler's default explorer, "auto": the gap-filling Sobol' sequence with up to 3
varying parameters (the draws of ``explorer="sobol"``, the default before "auto"), the
optimised Latin hypercube of the planned draws above (those of ``explorer="lhs"``).
Fixed parameters do not count. A state saved with the former default resumes where
"auto" explores with the same sequence and is refused, saying how to resume it, where
it does not."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import qmc
from test_adaptive import BOUNDS

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.study_change import StudyChanged, check_resume
from melissa_trainer.launcher.study_record import StudyRecord

#: four varying parameters (and a fixed one): "auto" explores the Latin hypercube
FOUR = {**BOUNDS, "c": (-5.0, 5.0), "f": (3.0, 3.0)}
#: three varying and two fixed: "auto" explores the Sobol' sequence
THREE = {**BOUNDS, "f": (3.0, 3.0), "g": (-1.0, -1.0)}
MAIN_STATE = Path(__file__).parents[1] / "data" / "breed_state_435f1c2.json"


def draws(sampler: BreedSampler, n: int, plan: int = 20) -> list[dict[str, float]]:
    """`n` draws, each observed at once (id: its index; loss: the first parameter)."""
    sampler.plan(plan)  # as the launcher does
    out = []
    for i in range(n):
        drawn = sampler.draw()
        out.append(drawn)
        sampler.observe(i, drawn, next(iter(drawn.values())))
    return out


def test_the_default_explorer_is_auto() -> None:
    default = inspect.signature(BreedSampler).parameters["explorer"].default
    assert default == "auto"
    assert BreedSampler(FOUR).explorer == "auto"


@pytest.mark.parametrize(("bounds", "engine"), [(BOUNDS, "sobol"), (THREE, "sobol"), (FOUR, "lhs")])
@pytest.mark.parametrize("exploration", [1.0, 0.6])
def test_auto_makes_the_draws_of_the_engine_it_picks(
    bounds: dict[str, tuple[float, float]], engine: str, exploration: float
) -> None:
    auto = BreedSampler(bounds, 5, exploration=exploration, min_observations=4)
    assert auto.engine == engine
    named = draws(BreedSampler(bounds, 5, exploration=exploration, min_observations=4,
                               explorer=engine), 20)  # fmt: skip
    assert draws(auto, 20) == named
    other = "lhs" if engine == "sobol" else "sobol"
    unlike = draws(BreedSampler(bounds, 5, exploration=exploration, min_observations=4,
                                explorer=other), 20)  # fmt: skip
    assert unlike != named  # the two engines draw apart: the comparison can fail
    assert auto.state_dict()["explorer"] == engine  # the state names the draws it holds


def test_with_four_parameters_exploring_alone_hands_out_a_latin_hypercube() -> None:
    drawn = draws(BreedSampler(FOUR, 2), 20)
    for name in ("t0", "a", "b", "c"):  # one draw in each of the 20 strata of each
        low, high = FOUR[name]
        strata = sorted(int((d[name] - low) / (high - low) * 20) for d in drawn)
        assert strata == list(range(20))
    assert {d["f"] for d in drawn} == {3.0}


def test_a_state_of_the_former_default_resumes_where_auto_explores_sobol() -> None:
    saved = json.loads(MAIN_STATE.read_text())  # main's, when "sobol" was the default
    assert saved["state"]["explorer"] == "sobol"
    sampler = BreedSampler(BOUNDS, 3, exploration=0.5, window=6, min_observations=3)
    sampler.plan(20)
    sampler.load_state_dict(saved["state"])
    after = []
    for i in range(9, 14):
        drawn = sampler.draw()
        after.append(drawn)
        sampler.observe(i, drawn, drawn["t0"] / 100.0)
    assert after == saved["after"]  # the draws main's code made after the state


def test_a_sobol_state_is_refused_where_auto_explores_lhs_saying_how_to_resume() -> None:
    old = BreedSampler(FOUR, 1, explorer="sobol")
    draws(old, 3)
    state = json.loads(json.dumps(old.state_dict()))
    fresh = BreedSampler(FOUR, 1)
    before = fresh.state_dict()
    with pytest.raises(ValueError, match=r"explorer='sobol' but this sampler has explorer='lhs' "
                       r"\(explorer 'auto' explores with 'lhs' for 4 varying .* pass "
                       r"explorer='sobol' to resume"):  # fmt: skip
        fresh.load_state_dict(state)
    assert fresh.state_dict() == before
    resumed = BreedSampler(FOUR, 1, explorer="sobol")  # as the message says
    resumed.plan(20)
    resumed.load_state_dict(state)
    assert resumed.position == 3
    # an explicit explorer that differs keeps the plain message
    with pytest.raises(ValueError, match=r"explorer='sobol' but this sampler has "
                       r"explorer='halton': build"):  # fmt: skip
        BreedSampler(FOUR, 1, explorer="halton").load_state_dict(state)


@pytest.mark.parametrize("cut", [0, 7])
def test_a_state_saved_by_auto_resumes_in_auto_and_in_the_engine_it_names(cut: int) -> None:
    def fresh(explorer: str = "auto") -> BreedSampler:
        sampler = BreedSampler(FOUR, 4, explorer=explorer, exploration=0.7, min_observations=3)
        sampler.plan(20)
        return sampler

    whole = draws(fresh(), 20)
    first = fresh()
    before = draws(first, cut)
    state = json.loads(json.dumps(first.state_dict()))
    for explorer in ("auto", "lhs"):
        resumed = fresh(explorer)
        resumed.load_state_dict(state)
        rest = []
        for i in range(cut, 20):
            drawn = resumed.draw()
            rest.append(drawn)
            resumed.observe(i, drawn, next(iter(drawn.values())))
        assert before + rest == whole


@pytest.mark.parametrize(("bounds", "refused"), [(THREE, False), (FOUR, True)])
def test_a_default_study_cannot_grow_on_resume_where_it_explores_a_hypercube(
    bounds: dict[str, tuple[float, float]], refused: bool
) -> None:
    def study(n: int) -> StudyRecord:
        sampler = make_sampler("breed", bounds, seed=1)
        sampler.plan(n)  # as the launcher does
        return StudyRecord(sampler, n, max_restarts=0, on_failure="raise", max_redraws=0,
                           first_simulation_id=0)  # fmt: skip

    first = study(6)
    for _ in range(2):
        first.take(0.0)
    state = json.loads(json.dumps(first.state_dict()))
    check_resume(state, study(6))  # the same size: resumes
    if refused:
        with pytest.raises(StudyChanged, match="changed from 6 to 8, but Breed explores a Latin"):
            check_resume(state, study(8))
    else:  # the Sobol' sequence continues exactly
        check_resume(state, study(8))


@pytest.mark.parametrize("options", [{"explorer": "AUTO"}, {"explorer": "maximin"}])
def test_an_unknown_explorer_is_refused_naming_the_choices(options: dict[str, Any]) -> None:
    with pytest.raises(
        ValueError, match=r"explorer must be one of \('auto', 'sobol', 'halton', 'lhs'\)"
    ):
        make_sampler("breed", BOUNDS, seed=0, **options)


def test_above_three_parameters_the_default_hands_out_scipy_s_design_in_its_order() -> None:
    sampler = BreedSampler(FOUR, 6)
    assert (sampler.engine, sampler.candidates) == ("lhs", 1)
    drawn = draws(sampler, 20)
    # the oracle: scipy's optimised hypercube over the 4 varying parameters, seeded
    # [seed, 31, block 0], its points in its order
    rng = np.random.default_rng([6, 31, 0])
    design = qmc.LatinHypercube(4, optimization="random-cd", rng=rng).random(20)
    names = ("t0", "a", "b", "c")
    low = np.array([FOUR[n][0] for n in names])
    span = np.array([FOUR[n][1] - FOUR[n][0] for n in names])
    points = np.array([[d[n] for n in names] for d in drawn])
    assert np.allclose(points, low + design * span, atol=1e-9)
    # gap-filling among 16 unused points (the option named) takes them in another order
    gap = BreedSampler(FOUR, 6, candidates=16)
    assert gap.candidates == 16
    other = np.array([[d[n] for n in names] for d in draws(gap, 20)])
    assert not np.allclose(other, points)
    assert np.allclose(np.sort(other, axis=0), np.sort(points, axis=0))  # the same design


def test_a_sequence_keeps_16_candidates_and_an_lhs_state_of_16_is_refused_saying_so() -> None:
    assert BreedSampler(BOUNDS).candidates == 16
    assert BreedSampler(FOUR, explorer="sobol").candidates == 16
    assert BreedSampler(BOUNDS, explorer="lhs").candidates == 1
    old = BreedSampler(FOUR, 2, explorer="lhs", candidates=16)  # "lhs" before None took 1
    draws(old, 3)
    state = json.loads(json.dumps(old.state_dict()))
    with pytest.raises(ValueError, match=r"candidates=16 but this sampler has candidates=1 "
                       r"\(with the 'lhs' explorer, candidates=None takes 1.* pass "
                       r"candidates=16 to resume"):  # fmt: skip
        BreedSampler(FOUR, 2, explorer="lhs").load_state_dict(state)
    with pytest.raises(ValueError, match=r"has candidates=1: build"):  # named: no hint
        BreedSampler(FOUR, 2, explorer="lhs", candidates=1).load_state_dict(state)
    resumed = BreedSampler(FOUR, 2, candidates=16)  # "auto" resolves to "lhs" here
    resumed.plan(20)
    resumed.load_state_dict(state)
    assert resumed.position == 3
