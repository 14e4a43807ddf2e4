"""A resumed adaptive sampler computes no design it restores, and makes the draws of
the uninterrupted one bit for bit; its counts of observations at its draws (which the
study's end-of-run account reads) are those of the uninterrupted one.

Before: the `Launcher`'s construction called `plan`, which optimised the "lhs" design
(Breed's explorer in 6 parameters, `DensitySampler`'s design: 0.6 s at 48 points, ~2 s
at 256 on the development machine), the resumed state then replaced it (it held only
the points used), and the first draw after the resume optimised it again, on the
launcher's thread under its lock; and `observed_at_draw` was not saved, so a study
resumed after its last draw had no count to judge (`study.feedback`).

Which designs are computed is counted on `Exploration._block` (each design is computed
by it, once per block); the oracle of the draws is the same sampler never interrupted,
compared as ``float.hex``; a resume goes through JSON, as a checkpoint holds the state.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher import BreedSampler, DensitySampler
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.exploration import Exploration
from melissa_trainer.study.feedback import FeedbackCheck

#: 6 varying parameters: Breed's explorer "auto" is "lhs" (`AUTO_SEQUENCE_DIMS` is 3)
BOX = {f"p{i}": (0.0, 10.0) for i in range(6)}
BUDGET = 24
#: the samplers resumed: Breed exploring its design alone and breeding with
#: gap-filling, and the density sampler (its design warped)
SAMPLERS: dict[str, Callable[[], AdaptiveSampler]] = {
    "breed": lambda: BreedSampler(BOX, seed=3),
    "breed-bred": lambda: BreedSampler(
        BOX, seed=3, exploration=0.5, min_observations=4, candidates=8
    ),
    "density": lambda: DensitySampler(BOX, seed=3, min_observations=4, evidence=0.0),
}


def count_designs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The blocks whose design is computed from now on, in order."""
    computed: list[int] = []
    block = Exploration._block

    def counted(self: Exploration, number: int) -> np.ndarray:
        computed.append(number)
        return block(self, number)

    monkeypatch.setattr(Exploration, "_block", counted)
    return computed


def launched(name: str) -> AdaptiveSampler:
    """A sampler as the `Launcher` has it when built: planned with the budget."""
    sampler = SAMPLERS[name]()
    sampler.plan(BUDGET)
    return sampler


def study(sampler: AdaptiveSampler, start: int, stop: int, made: list[Any]) -> list[Any]:
    """Draws `start` to `stop` (appended to `made`, by id), as hex; after draw `i` the
    simulation drawn 3 before is observed (the losses lag behind the draws, as a
    study's do), a loss that rises with p0."""
    for i in range(start, stop):
        made.append(sampler.draw())
        if i >= 3:
            sampler.observe(i - 3, made[i - 3], float((i - 3) % 5) + made[i - 3]["p0"])
    return [{k: v.hex() for k, v in draw.items()} for draw in made[start:stop]]


def resumed(name: str, state: dict[str, Any]) -> AdaptiveSampler:
    """A sampler resumed from `state` as a study resumes it: built (planned), the state
    loaded from its JSON, then prepared (the `Launcher`'s `start`)."""
    sampler = launched(name)
    sampler.load_state_dict(json.loads(json.dumps(state)))
    sampler.prepare()
    return sampler


def started(name: str) -> AdaptiveSampler:
    """A sampler as a fresh study's `Launcher` has it when started."""
    sampler = launched(name)
    sampler.prepare()
    return sampler


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(SAMPLERS))
@pytest.mark.parametrize("cut", [5, BUDGET])
def test_a_resume_computes_no_design_and_draws_as_the_uninterrupted_sampler(
    monkeypatch: pytest.MonkeyPatch, name: str, cut: int
) -> None:
    whole = started(name)
    drawn = study(whole, 0, 30, [])  # past the budget: the next block's too
    first, made = started(name), list[Any]()
    before = study(first, 0, cut, made)
    computed = count_designs(monkeypatch)
    again = resumed(name, first.state_dict())
    assert computed == []  # not when built, nor when loaded, nor prepared
    assert before + study(again, cut, 30, made) == drawn
    assert computed in ([], [1])  # the next block's design alone, if drawn past the budget
    assert again.state_dict() == whole.state_dict()
    # the oracle: draw j held the losses of the j - 3 simulations observed before it
    assert whole.observed_at_draw == 29 - 3
    assert whole.adaptive_draws == sum(1 for j in range(30) if j - 3 >= whole.min_losses)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["breed", "density"])
def test_a_state_saved_before_it_held_its_design_computes_it_once_when_prepared(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    drawn = study(started(name), 0, BUDGET, [])
    first, made = started(name), list[Any]()
    before = study(first, 0, 7, made)
    state = first.state_dict()
    design_state = state["exploration_state" if name == "breed" else "design_state"]
    del design_state["design"], state["observed_at_draw"], state["adaptive_draws"]  # older
    computed = count_designs(monkeypatch)
    again = resumed(name, state)
    assert computed == [0]  # by `prepare`, off the launcher's lock
    assert before + study(again, 7, BUDGET, made) == drawn
    assert computed == [0]


def feedback_lines(sampler: AdaptiveSampler) -> list[str]:
    check = FeedbackCheck()
    check.loss_steps = 20
    return check.lines(sampler)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cut", [3, 12])
def test_a_study_resumed_after_its_last_draw_is_accounted_as_the_uninterrupted_one(
    cut: int,
) -> None:
    """Breed breeding (exploration 0) with losses lagging: cut 3, a study whose draws
    all explored (none adapted); cut 12, one whose last draw only adapted (few). The
    resumed sampler draws nothing after its resume: its account is its state's."""

    def breed() -> BreedSampler:
        sampler = BreedSampler({"a": (0.0, 1.0)}, seed=0, exploration=0.0)
        sampler.plan(cut)
        return sampler

    whole, made = breed(), []
    for i in range(cut):  # after draw i, the simulation drawn 3 before is observed
        made.append(whole.draw())
        if i >= 3:
            whole.observe(i - 3, made[i - 3], float(i))
    resumed = breed()
    resumed.load_state_dict(json.loads(json.dumps(whole.state_dict())))
    lines = feedback_lines(whole)
    assert len(lines) == 1  # (one warning: none adapted, or few)
    assert feedback_lines(resumed) == lines
    # the oracle: draw j held j - 3 losses, and adapts from 8 (min_observations)
    adaptive = sum(1 for j in range(cut) if j - 3 >= 8)
    assert whole.adaptive_draws == resumed.adaptive_draws == adaptive == (cut == 12)
    assert whole.observed_at_draw == resumed.observed_at_draw == max(cut - 4, 0)
    assert ("steered none" if cut == 3 else f"of 12 draws, {adaptive} adaptive") in lines[0]


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("observed_at_draw", -1, "invalid observed_at_draw"),
        ("adaptive_draws", True, "invalid adaptive_draws"),
        ("adaptive_draws", 1, "1 adaptive draws of 0 draws"),  # (none drawn)
    ],
)
def test_a_malformed_count_is_refused(key: str, value: Any, match: str) -> None:
    state = launched("breed").state_dict()
    with pytest.raises(ValueError, match=match):
        launched("breed").load_state_dict({**state, key: value})


@pytest.mark.parametrize(
    "design",
    [
        {"block": 0, "points": [[0.5] * 6] * (BUDGET - 1)},  # a point short
        {"block": 0, "points": [[0.5] * 5] * BUDGET},  # a parameter short
        {"block": -1, "points": [[0.5] * 6] * BUDGET},
        {"block": 0, "points": [[1.5] + [0.5] * 5] * BUDGET},  # outside the unit cube
        {"block": 0, "points": [[True] + [0.5] * 5] * BUDGET},
        [[0.5] * 6] * BUDGET,  # no block
    ],
)
def test_a_malformed_design_is_refused_and_nothing_changes(design: Any) -> None:
    sampler = started("breed")
    study(sampler, 0, 3, [])
    state = sampler.state_dict()
    state["exploration_state"] = {**state["exploration_state"], "design": design}
    again = launched("breed")
    before = again.state_dict()
    with pytest.raises(ValueError, match="malformed design"):
        again.load_state_dict(state)
    assert again.state_dict() == before
