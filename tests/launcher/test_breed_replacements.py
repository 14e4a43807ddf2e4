"""What Breed's "lhs" explorer (the default above 3 varying parameters) draws in place
of simulations given up (`BreedSampler.failed`): once the planned design is explored,
a point whose nearest draw was not given up, without optimising a second design on the
launcher's thread (before: the first redraw past the design optimised a whole next
design there, under the launcher's lock, and took its first point).

Oracles: a sampler of the same seed told nothing (the design's draws); the count of
optimised designs computed (scipy's engine, counted where the explorer calls it); the
study's records for which draws failed; distances computed here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from failing_study import (
    BOX,
    N,
    designs_optimised,
    failing_launcher,
    rows,
    study,
    wait_done,
)

from melissa_trainer.launcher import exploration as exploration_module
from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.sampler_account import drawn_by

pytestmark = pytest.mark.timeout(180)


def fresh(seed: int = 5, n: int = 10, **options: Any) -> BreedSampler:
    sampler = BreedSampler(BOX, seed=seed, **options)
    sampler.plan(n)
    return sampler


def test_a_redraw_past_the_design_optimises_no_second_design(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    optimised = designs_optimised(monkeypatch)
    sampler = fresh()
    assert sampler.engine == "lhs"  # "auto" above 3 varying parameters
    made: list[Any] = []
    study(sampler, 0, 10, made)
    assert optimised == [6]  # the planned design
    failed = [i for i, p in enumerate(made) if p["p0"] > 0.7]
    assert failed, "the seed must give failures"
    study(sampler, 10, 10 + len(failed), made)
    # before: [6, 6], the next design optimised for the first redraw, under the lock
    assert optimised == [6]
    assert sampler.replaced == len(failed) and sampler.explored == 10 + len(failed)
    assert f"0 bred from the worst-trained simulations ({len(failed)} explored in place" in (
        drawn_by(sampler)
    )
    # each replacement's nearest earlier draw was not given up
    points = rows(made)
    told = {i for i, p in enumerate(made) if p["p0"] > 0.7}
    for j in range(10, len(made)):
        nearest = int(np.argmin(np.sum((points[:j] - points[j]) ** 2, axis=1)))
        assert nearest not in told, (j, nearest)
    # the planned design is drawn whole and unchanged: a sampler told nothing's draws
    alone = fresh()
    assert made[:10] == [alone.draw() for _ in range(10)]


def test_replacements_resume_bit_for_bit_without_the_next_design(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole: list[Any] = []
    study(fresh(), 0, 14, whole)  # 4 given up (one of them a replacement): 4 redraws
    optimised = designs_optimised(monkeypatch)
    for cut in (10, 12):  # at the design's end, and between two replacements
        first, made = fresh(), []
        study(first, 0, cut, made)
        state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint holds it
        assert state["failed"] and state["replaced"] == cut - 10
        resumed = fresh()
        resumed.load_state_dict(state)
        del optimised[:]
        study(resumed, cut, 14, made)
        assert made == whole
        # the resumed sampler computes neither the design it drew (its points are in
        # the state) nor the next one
        assert optimised == []


def test_a_sampler_told_nothing_is_unchanged() -> None:
    """Its state has no replacement entries, and its draws past the budget are the next
    design's, as before (a state saved before replacements existed resumes alike)."""
    plain = fresh()
    draws = [plain.draw() for _ in range(12)]
    state = plain.state_dict()
    assert plain.replaced == 0 and "failed" not in state and "replaced" not in state
    # the next design's first points: those of an unplanned design of 10 seeded as block 1
    explorer = exploration_module.Exploration("lhs", 6, 5, np.ones(6, bool))
    explorer.plan(10)
    design = explorer._block(1)
    np.testing.assert_array_equal(rows(draws[10:]), design[:2])


def test_a_sequence_explorer_keeps_nothing_and_draws_on() -> None:
    told = fresh(explorer="sobol")
    plain = fresh(explorer="sobol")
    made: list[Any] = []
    study(told, 0, 14, made)
    assert made == [plain.draw() for _ in range(14)]
    assert "failed" not in told.state_dict()


def test_a_malformed_replacement_state_is_refused() -> None:
    sampler = fresh(n=4)
    draws = [sampler.draw() for _ in range(4)]
    sampler.failed(0, draws[0])
    sampler.draw()
    target = fresh(n=4)
    with pytest.raises(ValueError, match="2 replacements for"):
        target.load_state_dict({**sampler.state_dict(), "replaced": 2})
    with pytest.raises(ValueError, match="malformed failed points"):
        target.load_state_dict({**sampler.state_dict(), "failed": [[0.5] * 5]})


@pytest.mark.e2e
def test_a_breed_study_with_failures_optimises_one_design(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    optimised = designs_optimised(monkeypatch)
    sampler = make_sampler("breed", BOX, seed=3)
    launcher = failing_launcher(sampler, tmp_path)
    launcher.start(tmp_path / "rendezvous", study_dir=tmp_path)
    try:
        wait_done(launcher)
    finally:
        launcher.stop()
    outcomes = sorted(launcher.outcomes(), key=lambda o: o.simulation_id)
    failed = [o.simulation_id for o in outcomes if o.status == "failed"]
    assert launcher.summary()["finished"] == N and len(failed) >= 1
    assert optimised == [6]  # before: [6, 6]
    assert isinstance(sampler, BreedSampler) and sampler.replaced == len(failed)
    points = rows([dict(o.parameters) for o in outcomes])
    for j in range(N, len(outcomes)):
        nearest = int(np.argmin(np.sum((points[:j] - points[j]) ** 2, axis=1)))
        assert outcomes[nearest].status == "finished", (j, nearest)


def test_the_fixed_lhs_sampler_replaces_away_from_failures_and_resumes() -> None:
    """`LatinHypercubeSampler` ("lhs"): its planned design whole, then each draw due as a
    replacement a point whose nearest draw was not given up (before: the next design's
    points, wherever they lay); resumed mid-replacement, the same draws."""

    def lhs() -> Any:
        sampler = make_sampler("lhs", BOX, seed=5)
        sampler.plan(10)
        return sampler

    whole: list[Any] = []
    sampler = lhs()
    study(sampler, 0, 13, whole)
    told = {i for i, p in enumerate(whole) if p["p0"] > 0.7}
    assert sampler.replaced == len(told) == 3  # (the launcher's redraws: 13 draws)
    plain = lhs()
    assert whole[:10] == [plain.draw() for _ in range(10)]
    assert "failed" not in plain.state_dict()
    nexts = [plain.draw() for _ in range(3)]  # told nothing: the next design, as before
    points = rows(whole)
    for j in range(10, 13):
        nearest = int(np.argmin(np.sum((points[:j] - points[j]) ** 2, axis=1)))
        assert nearest not in told, (j, nearest)
        assert whole[j] != nexts[j - 10]
    for cut in (10, 12):
        first, made = lhs(), []
        study(first, 0, cut, made)
        resumed = lhs()
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        study(resumed, cut, 13, made)
        assert made == whole
