"""The loss predictor's deviation solve (`launcher.loss_predictor`): a new study's
predictor solves with its Cholesky factor by a triangular solve, and says so in the
sampler's state; a state saved before that (no ``std_solve``) resumes with the general
LU solve its draws were made with, bit for bit, and keeps it through later resumes; a
state naming another solve is refused. The two solves round differently (the
deviations differ in the last bits), which is why the state carries it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from melissa_trainer.launcher import SurrogateSampler
from melissa_trainer.launcher.loss_predictor import LossPredictor

#: the benchmark's wide space: 12 varying parameters
BOX = {f"p{i}": (0.0, 10.0) for i in range(12)}


def loss_of(parameters: dict[str, float]) -> float:
    """A smooth loss, so that no two candidates tie on it."""
    return 1.0 + parameters["p0"] ** 2 + 0.3 * parameters["p1"]


def run(sampler: SurrogateSampler, n: int, start: int = 0) -> list[dict[str, float]]:
    """`n` draws, each observed at once with `loss_of`."""
    draws = []
    for i in range(start, start + n):
        p = sampler.draw()
        sampler.observe(i, p, loss_of(p))
        draws.append(p)
    return draws


def reference_std(predictor: LossPredictor, candidates: np.ndarray, solve: str) -> np.ndarray:
    """The deviation as `solve` computes it, from the predictor's own factor and kernel."""
    factor = predictor._known_factor
    kernel = predictor._kernel(predictor._known, candidates)
    if solve == "lu":
        solved = np.linalg.solve(factor, kernel)
    else:
        solved = solve_triangular(factor, kernel, lower=True, check_finite=False)
    out: np.ndarray = np.sqrt(np.clip(1.0 - np.sum(solved * solved, axis=0), 0.0, None))
    return out


def bits(values: np.ndarray) -> list[str]:
    return [float(v).hex() for v in values]


@pytest.mark.timeout(60)
def test_a_new_study_solves_triangularly_and_its_state_says_so() -> None:
    sampler = SurrogateSampler(BOX, seed=3)
    run(sampler, 30)
    assert sampler.std_solve == "triangular"
    state: dict[str, Any] = json.loads(json.dumps(sampler.state_dict()))
    assert state["std_solve"] == "triangular"
    predictor = sampler.predictor()
    assert predictor is not None and predictor.std_solve == "triangular"
    candidates = np.random.default_rng(0).random((256, 12))
    triangular = reference_std(predictor, candidates, "triangular")
    assert bits(predictor.std(candidates)) == bits(triangular)
    # the reason the state carries it: the LU solve rounds differently
    assert bits(reference_std(predictor, candidates, "lu")) != bits(triangular)
    resumed = SurrogateSampler(BOX, seed=3)
    resumed.load_state_dict(state)
    assert resumed.std_solve == "triangular"
    assert run(resumed, 10, start=30) == run(sampler, 10, start=30)


@pytest.mark.timeout(60)
def test_a_state_saved_before_the_solve_was_kept_resumes_with_lu_as_it_drew() -> None:
    uninterrupted = SurrogateSampler(BOX, seed=5)
    uninterrupted.std_solve = "lu"  # the code before 2026-12-05: every study's solve
    run(uninterrupted, 30)
    state = json.loads(json.dumps(uninterrupted.state_dict()))
    del state["std_solve"]  # as that code saved it
    resumed = SurrogateSampler(BOX, seed=5)
    resumed.load_state_dict(state)
    assert resumed.std_solve == "lu"
    predictor = resumed.predictor()
    assert predictor is not None
    candidates = np.random.default_rng(1).random((256, 12))
    assert bits(predictor.std(candidates)) == bits(reference_std(predictor, candidates, "lu"))
    assert run(resumed, 10, start=30) == run(uninterrupted, 10, start=30)
    # saved again, it stays the old study's solve through a second resume
    again = SurrogateSampler(BOX, seed=5)
    again.load_state_dict(json.loads(json.dumps(resumed.state_dict())))
    assert again.std_solve == "lu"
    assert run(again, 5, start=40) == run(uninterrupted, 5, start=40)


@pytest.mark.timeout(60)
def test_an_unknown_solve_is_refused_and_nothing_changes() -> None:
    sampler = SurrogateSampler(BOX, seed=2)
    run(sampler, 12)
    state = {**json.loads(json.dumps(sampler.state_dict())), "std_solve": "cholesky"}
    fresh = SurrogateSampler(BOX, seed=2)
    with pytest.raises(ValueError, match="std_solve 'cholesky'"):
        fresh.load_state_dict(state)
    assert fresh.position == 0 and fresh.std_solve == "triangular"
    points = np.random.default_rng(2).random((10, 3))
    with pytest.raises(ValueError, match="std_solve must be one of"):
        LossPredictor(points, np.ones(10), points, std_solve="cholesky")
