"""A Breed checkpoint written before gap-filling resumes: the state has no "candidates"
(nor "memory") and its exploration_state is a plain Sobol' sampler's. It is read as
``candidates=1``: a BreedSampler(candidates=1) continues with the draws the old code made;
other candidates are refused with a message that says how to resume it.

The state and the draws after it were written by main's code before gap-filling (commit
c03823e, its launcher/ as at a2fa657): a `StudyRecord` of a `BreedSampler(BOUNDS, 3,
exploration=0.5, window=4, min_observations=3)`, 9 simulations taken, each finished and
observed at once with the loss t0 / 100, then `state_dict()`; then 8 more the same way.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from test_adaptive import BOUNDS

from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.samplers import SobolSampler
from melissa_trainer.launcher.study_record import StudyRecord

# fmt: off
MAIN_STATE: dict[str, Any] = {
    "version": 3,
    "sampler": {
        "kind": "breed", "names": ["t0", "a", "b"], "seed": 3, "position": 9, "window": 4,
        "exploration": 0.5, "exploration_final": None, "min_observations": 3, "sigma": 0.15,
        "power": 1.0, "floor": 0.5, "explorer": "sobol", "decay_draws": None,
        "observations": [
            {"simulation_id": 5, "loss": 2.019862249493599, "parameters":
                {"t0": 201.9862249493599, "a": 0.30435050278902054, "b": 0.37824937142431736}},
            {"simulation_id": 6, "loss": 3.7612615525722504, "parameters":
                {"t0": 376.12615525722504, "a": -0.32445117831230164, "b": 5.946962488815188}},
            {"simulation_id": 7, "loss": 2.1130595926327747, "parameters":
                {"t0": 211.30595926327746, "a": 0.14477147356960307, "b": 1.8422995309369439}},
            {"simulation_id": 8, "loss": 4.365153897553682, "parameters":
                {"t0": 436.51538975536823, "a": 0.558739148080349, "b": 4.548450987786055}},
        ],
        "exploration_state": {"kind": "sobol", "names": ["t0", "a", "b"], "seed": 3,
                              "position": 7, "scramble": True},
    },
    "next_id": 9,
    "simulations": {
        "ids": [0, 1, 2, 3, 4, 5, 6, 7, 8], "status": ["finished"] * 9,
        "parameters": {
            "t0": [145.2821385115385, 470.35466991364956, 316.99687615036964,
                292.36551746726036, 378.7049626665357, 201.9862249493599,
                376.12615525722504, 211.30595926327746, 436.51538975536823],
            "a": [0.8610611371695995, -0.7598925791680813, 0.11936843022704124,
                -0.0015905313193798065, -0.8858507288237414, 0.30435050278902054,
                -0.32445117831230164, 0.14477147356960307, 0.558739148080349],
            "b": [6.80833731777966, 2.494502579793334, 8.264962304383516,
                2.578987777233124, 2.626160431987512, 0.37824937142431736,
                5.946962488815188, 1.8422995309369439, 4.548450987786055],
        },
        "restarts": [0] * 9, "attempts": [1] * 9, "exit_codes": [[0]] * 9,
        "seconds": [0.0] * 9, "reasons": {},
    },
    "redraws": 0,
}
# fmt: on
#: the 8 draws main's code made after the state (t0, a, b) and their parents (None: explored)
MAIN_NEXT = [
    [280.08349431517445, -0.018031175284975998, 3.5074292817141517],
    [221.91404665761098, 0.1788396270795345, 0.040782380689619036],
    [222.656965154067, 0.3626170274806335, 1.732152720685347],
    [160.37140525877476, -0.5700582414865494, 8.979547135531902],
    [182.1609504520893, 0.22409038804471493, 4.007263211533427],
    [183.77163148278387, 0.03781308807553163, 1.478281759744049],
    [408.4514193236828, -0.15519985742866993, 9.649490276351571],
    [299.8452887731948, -0.205053830057623, 8.675829336527364],
]
MAIN_PARENTS = [6, 7, 7, None, None, 10, None, 15]
OPTIONS: dict[str, Any] = {"exploration": 0.5, "window": 4, "min_observations": 3}


def breed(**options: Any) -> BreedSampler:
    return BreedSampler(BOUNDS, 3, **OPTIONS, **options)


def old_state() -> dict[str, Any]:
    """The sampler's block of main's launcher state (a copy)."""
    return copy.deepcopy(MAIN_STATE["sampler"])


def go_on(sampler: BreedSampler) -> tuple[list[list[float]], list[int | None]]:
    """8 draws, each observed at once as main's record did: the values and parents."""
    values, parents = [], []
    for sid in range(sampler.position, sampler.position + 8):
        drawn = sampler.draw()
        values.append(list(drawn.values()))
        parents.append(sampler.last_parent)
        sampler.observe(sid, drawn, drawn["t0"] / 100.0)
    return values, parents


@pytest.mark.parametrize("memory", [1000, None, 2])
def test_candidates_1_continues_the_old_draws_whatever_its_memory(memory: int | None) -> None:
    """With one candidate nothing is remembered: `memory` changes no draw."""
    sampler, saved = breed(candidates=1, memory=memory), old_state()
    sampler.load_state_dict(saved)
    assert saved == MAIN_STATE["sampler"]  # not modified
    assert (sampler.position, sampler.explored) == (9, 7)  # the old exploration position
    assert go_on(sampler) == (MAIN_NEXT, MAIN_PARENTS)  # 3 explored, 5 bred
    assert sampler.explored == 10


def test_saved_again_it_is_of_todays_format_and_resumes_the_same() -> None:
    sampler = breed(candidates=1)
    sampler.load_state_dict(old_state())
    state = json.loads(json.dumps(sampler.state_dict()))
    assert (state["candidates"], state["memory"]) == (1, 1000)
    assert state["exploration_state"] == {"engine": "sobol", "explored": 7, "position": 7,
                                          "drawn": []}  # fmt: skip
    resumed = breed(candidates=1)
    resumed.load_state_dict(state)
    assert go_on(resumed) == (MAIN_NEXT, MAIN_PARENTS)


@pytest.mark.parametrize("candidates", [None, 2])  # None: the default, 16
def test_other_candidates_are_refused_saying_to_build_with_1(candidates: int | None) -> None:
    sampler = breed() if candidates is None else breed(candidates=candidates)
    before = sampler.state_dict()
    with pytest.raises(ValueError, match="predates gap-filling.*with candidates=1 to resume"):
        sampler.load_state_dict(old_state())
    assert sampler.state_dict() == before


@pytest.mark.parametrize(
    ("exploration", "match"),
    [
        ({"seed": 4}, "exploration state has seed=4, its sampler seed=3"),
        ({"names": ["t0", "a"]}, "exploration state has names="),
        ({"scramble": False}, "unscrambled"),
        ({"kind": "halton"}, "engine='halton', this sampler explorer='sobol'"),
        ({"position": -1}, "invalid explored -1"),
        ({"position": "7"}, "invalid explored '7'"),
    ],
)
def test_a_malformed_old_exploration_state_is_refused(
    exploration: dict[str, Any], match: str
) -> None:
    saved = old_state()
    saved["exploration_state"].update(exploration)
    sampler = breed(candidates=1)
    with pytest.raises(ValueError, match=match):
        sampler.load_state_dict(saved)
    assert sampler.position == 0


def test_an_old_state_of_another_kind_is_refused_as_such() -> None:
    sobol = SobolSampler(BOUNDS, 3)
    sobol.draw()
    with pytest.raises(ValueError, match="kind='sobol' but this sampler has kind='breed'"):
        breed(candidates=1).load_state_dict(sobol.state_dict())


def test_the_launcher_state_loads_as_it_is() -> None:
    """The launcher's state (version 3, unchanged by gap-filling) carries the sampler's:
    main's whole record loads and takes the same simulations next."""

    def record(sampler: BreedSampler) -> StudyRecord:
        return StudyRecord(sampler, 17, max_restarts=0, on_failure="raise", max_redraws=0,
                           first_simulation_id=0)  # fmt: skip

    with pytest.raises(ValueError, match="predates gap-filling"):
        record(breed()).load_state_dict(MAIN_STATE)
    study = record(breed(candidates=1))
    study.load_state_dict(MAIN_STATE)
    taken = []
    for _ in range(8):
        sid = study.take(0.0)
        assert sid is not None
        parameters = study.records[sid].parameters
        study.process_ended(sid, 0.0, 0)
        study.observe({sid: parameters["t0"] / 100.0})
        taken.append(list(parameters.values()))
    assert taken == MAIN_NEXT
    assert study.state_dict()["sampler"]["candidates"] == 1
