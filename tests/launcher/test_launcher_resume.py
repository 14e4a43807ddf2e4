"""A resumed launcher: it does not rerun finished simulations, relaunches the
interrupted one under the attempt it names, and draws the parameters an uninterrupted
study would have (Breed's design taken from the state, not optimised again).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from launcher_runs import command, launcher, run_study, runs
from waiting import wait_until

from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.exploration import Exploration
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_resumed_study_does_not_rerun_finished_simulations(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def make() -> Launcher:
        sampler = make_sampler("sobol", {"x": (0, 1)}, seed=4)
        return launcher(command(tmp_path, "hang", hang=[2]), 4, sampler, job_limit=1)

    first = make()
    first.start(tmp_path / "rendezvous")
    try:
        wait_until(lambda: len(runs(tmp_path)) == 3, "simulation 2 to hang", 60.0)
        state = json.loads(json.dumps(first.state_dict()))
    finally:
        first.stop()
    assert {k: v["status"] for k, v in records_of(state).items()} == {
        0: "finished", 1: "finished", 2: "running"
    }  # fmt: skip
    second = make()
    second.load_state_dict(state)
    assert second.summary()["pending"] == 2  # 2 to relaunch, 3 not drawn yet
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    caplog.clear()
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
    finally:
        second.stop()
    # its start and its end name the same attempt (trial F2: "started (attempt 1)", then
    # "attempt 0 finished": the attempt killed by the stop has no exit code)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("simulation 2 ")]
    assert any(m.startswith("simulation 2 started (attempt 1)") for m in said), said
    assert any(m.startswith("simulation 2 attempt 1 finished") for m in said), said
    assert sorted((sid, attempt) for sid, attempt, _ in runs(tmp_path)) == [
        (0, 0), (1, 0), (2, 0), (2, 1), (3, 0)
    ]  # fmt: skip
    uninterrupted = make_sampler("sobol", {"x": (0, 1)}, seed=4)
    expected = [uninterrupted.draw() for _ in range(4)]
    final = records_of(second.state_dict())
    assert [final[i]["parameters"] for i in range(4)] == expected
    assert all(final[i]["status"] == "finished" for i in range(4))
    with pytest.raises(RuntimeError, match="before start"):
        second.load_state_dict(state)


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_resumed_launcher_optimises_no_design_and_draws_the_uninterrupted_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Breed in 6 parameters explores the optimised Latin hypercube of the study: the
    resumed launcher takes it from the state (before: built, it optimised the design,
    which the state replaced, and its first draw optimised it again)."""
    box = {f"p{i}": (0.0, 1.0) for i in range(6)}

    def make() -> Launcher:
        sampler = BreedSampler(box, seed=4)
        return launcher(command(tmp_path, "hang", hang=[2]), 6, sampler, job_limit=1)

    first = make()
    first.start(tmp_path / "rendezvous")
    try:
        wait_until(lambda: len(runs(tmp_path)) == 3, "simulation 2 to hang", 60.0)
        state = json.loads(json.dumps(first.state_dict()))
    finally:
        first.stop()
    computed: list[int] = []
    block = Exploration._block
    monkeypatch.setattr(Exploration, "_block", lambda e, n: computed.append(n) or block(e, n))
    second = make()
    second.load_state_dict(state)
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
    finally:
        second.stop()
    assert computed == []  # built, loaded, started, drawn: the state held the design
    uninterrupted = BreedSampler(box, seed=4)
    uninterrupted.plan(6)
    expected = [uninterrupted.draw() for _ in range(6)]
    final = records_of(second.state_dict())
    assert [final[i]["parameters"] for i in range(6)] == expected
    assert second.sampler.state_dict() == uninterrupted.state_dict()
