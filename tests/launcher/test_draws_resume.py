"""The study's record of its draws (``{study_dir}/draws.csv``, `launcher.draw_log`)
across a resume: the rows of the draws the checkpoint holds are kept as they were, the
rows a killed run wrote after its checkpoint (draws the resume makes again under the
same ids; a line cut by the kill) are dropped, and the resume's draws are appended: one
draw row per simulation, none lost or duplicated.

Before: no such file. The oracle: the launchers' own records of each simulation's
parameters (`state_dict`), and the first run's rows as it left them.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from launcher_runs import command, launcher, run_study, runs
from waiting import wait_until

from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.launcher.draw_log import DrawLog
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")


def read(path: Path) -> list[list[str]]:
    with path.open(newline="") as file:
        return list(csv.reader(file))


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_resumed_study_keeps_its_checkpointed_draws_and_drops_the_later_ones(
    tmp_path: Path,
) -> None:
    def make() -> Launcher:
        sampler = make_sampler("sobol", {"x": (0, 1), "y": (0, 2)}, seed=4)
        return launcher(command(tmp_path, "hang", hang=[2]), 5, sampler, job_limit=1)

    path = tmp_path / "draws.csv"  # (the study folder: the rendezvous folder's parent)
    first = make()
    first.start(tmp_path / "rendezvous")
    try:
        wait_until(lambda: len(runs(tmp_path)) == 3, "simulation 2 to hang", 60.0)
        state = json.loads(json.dumps(first.state_dict()))
    finally:
        first.stop()
    assert first.draws_path == path
    before = read(path)
    assert [r[:2] for r in before[1:]] == [["0", "draw"], ["1", "draw"], ["2", "draw"]]
    # what a run killed after its checkpoint leaves: a draw the checkpoint lacks, and a
    # line cut mid-write
    with path.open("a") as file:
        file.write("3,draw,9.0,9.0,sobol,,\n4,dr")  # (out of bounds: never drawn)
    second = make()
    second.load_state_dict(state)
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
    finally:
        second.stop()
    after = read(path)
    assert after[: len(before)] == before  # the checkpoint's rows, as they were
    draws = [r for r in after[1:] if r[1] == "draw"]
    assert [int(r[0]) for r in draws] == [0, 1, 2, 3, 4]
    saved = records_of(second.state_dict())
    for row in draws:  # each as the launcher recorded it, drawn by the sobol sampler
        parameters = saved[int(row[0])]["parameters"]
        assert (float(row[2]), float(row[3])) == (parameters["x"], parameters["y"]), row
        assert row[4:] == ["sobol", "", ""], row


def test_a_resume_of_a_study_saved_without_the_file_records_its_draws_as_unrecorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "draws.csv"
    saved = {0: {"x": 0.25}, 1: {"x": 0.75}}
    log = DrawLog.open(path, ["x"], saved, next_id=2)
    log.drew(2, {"x": 0.5}, "uniform", None)
    log.observed({0: 1.5})
    log.gave_up(0, "redrawn")
    log.close()
    assert read(path) == [
        ["simulation_id", "event", "x", "drawn", "parent", "loss"],
        ["0", "draw", "0.25", "unrecorded", "", ""],
        ["1", "draw", "0.75", "unrecorded", "", ""],
        ["2", "draw", "0.5", "uniform", "", ""],
        ["0", "loss", "0.25", "unrecorded", "", "1.5"],
        ["0", "redrawn", "0.25", "unrecorded", "", "1.5"],  # (its last loss, repeated)
    ]
    # resumed again: the loss kept is the one a given-up row repeats
    log = DrawLog.open(path, ["x"], {**saved, 2: {"x": 0.5}}, next_id=3)
    log.gave_up(0, "abandoned")
    log.close()
    assert read(path)[-1] == ["0", "abandoned", "0.25", "unrecorded", "", "1.5"]


def test_a_parameter_named_like_a_column_keeps_its_own_column() -> None:
    assert DrawLog.columns(["loss", "a"]) == [
        "simulation_id", "event", "param_loss", "a", "drawn", "parent", "loss"
    ]  # fmt: skip


def test_a_fresh_study_sets_an_earlier_runs_file_aside(tmp_path: Path) -> None:
    path = tmp_path / "draws.csv"
    path.write_text("an earlier run's rows\n")
    DrawLog.open(path, ["x"]).close()
    (aside,) = tmp_path.glob("draws-previous-*.csv")
    assert aside.read_text() == "an earlier run's rows\n"
    assert read(path) == [["simulation_id", "event", "x", "drawn", "parent", "loss"]]


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_simulation_given_up_and_redrawn_has_its_row_and_its_replacement_its_draw(
    tmp_path: Path,
) -> None:
    # simulation 1 fails every attempt: given up after its restart, replaced by 3
    sim = command(tmp_path, "exit", fail=[1])
    study = launcher(sim, 3, tuning={"max_restarts": 1, "on_failure": "redraw"})
    study.start(tmp_path / "rendezvous")
    try:
        run_study(study)
    finally:
        study.stop()
    rows = read(tmp_path / "draws.csv")[1:]
    assert [r[:2] for r in rows if r[1] != "draw"] == [["1", "redrawn"]]
    assert sorted(int(r[0]) for r in rows if r[1] == "draw") == [0, 1, 2, 3]
    assert sorted(sid for sid, _, _ in runs(tmp_path)) == [0, 1, 1, 2, 3]  # (the oracle)
