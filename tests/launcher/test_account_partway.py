"""A solver that crashes part-way for some parameters (exit 1 after sending some steps)
is named in the study's end-of-run account, with its exit codes and parameters, as a
WARNING: before, its samples counted it as having "contributed", and the account said
"every one contributed" after a study that gave up a quarter of its simulations."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
from pathlib import Path

import pytest
from launcher_said import one_line
from study_runs import study_to_its_end

from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.account import SimulationOutcome, study_account
from melissa_trainer.launcher.backends.local import LocalBackend

#: sends one step, then crashes when its parameter x is above 0.5 (recording what it
#: was given: the test's oracle), else sends two more and closes
SOLVER = r"""
import json, sys
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

# (an exception leaving the with block waits for what is queued: step 0 arrives)
with Client({"u": ((4,), "float32")}) as client:
    x = client.parameters["x"]
    client.send(0, u=np.full(4, x, np.float32))
    if x > 0.5:
        Path(sys.argv[1], f"crash-{client.simulation_id}.json").write_text(
            json.dumps(dict(client.parameters))
        )
        sys.exit(1)
    for t in (1, 2):
        client.send(t, u=np.full(4, x + t, np.float32))
"""


@pytest.mark.e2e
@pytest.mark.skipif(sys.platform != "linux", reason="uses PDEATHSIG")
@pytest.mark.timeout(120)
def test_simulations_given_up_part_way_are_named_at_the_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    (tmp_path / "solver.py").write_text(textwrap.dedent(SOLVER))
    crashes = tmp_path / "crashes"
    crashes.mkdir()
    # x in [0, 1] with "list" draws: the two above 0.5 crash, their redraws do not
    draws = [{"x": 0.1}, {"x": 0.9}, {"x": 0.2}, {"x": 0.8}, {"x": 0.3}, {"x": 0.4}]
    launch = Launcher(
        [sys.executable, str(tmp_path / "solver.py"), str(crashes)],
        draws,
        4,
        job_limit=2,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    study_to_its_end(launch, tmp_path / "rdv")
    crashed = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in crashes.iterdir()}
    assert sorted(crashed) == [1, 3]  # the oracle: what the solver saw
    records = [r for r in caplog.records if one_line(r.getMessage()).startswith("study account")]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING
    lines = records[0].getMessage().splitlines()
    assert lines[0] == (
        "study account: 6 simulations ended, 6 contributed samples; 2 (33% of the 6 ended) "
        "failed part-way:"
    ), lines
    assert (
        "2 given up part-way (redrawn), after sending some samples: simulations 1, 3;" in lines[1]
    )
    assert f"e.g. simulation 1, exit codes [1], parameters {crashed[1]}" in lines[1]
    # the line said when it was given up counts its one attempt in words
    said = [one_line(r.getMessage()) for r in caplog.records]
    assert any(m.startswith("simulation 1 failed once (exit codes [1], ") for m in said), said
    assert any(
        "given up, new parameters drawn in its place (redraw 1 of at most" in m for m in said
    )


def test_a_study_with_no_failure_still_says_every_one_contributed() -> None:
    finished = [SimulationOutcome(i, "finished", (0,), "", {"x": 0.5}) for i in range(2)]
    lines, warn = study_account(finished, {0: (3, 0), 1: (3, 0)})
    assert lines == [
        "study account: 2 simulations ended, 2 contributed samples; every one contributed."
    ]
    assert not warn


def test_part_way_failures_are_listed_beside_those_that_sent_nothing() -> None:
    outcomes = [
        SimulationOutcome(0, "finished", (0,), "", {"x": 0.1}),
        SimulationOutcome(1, "failed", (1,), "", {"x": 0.9}),
        SimulationOutcome(2, "abandoned", (1,), "", {"x": 0.7}),
    ]
    lines, warn = study_account(outcomes, {0: (3, 0), 1: (1, 0)})
    assert warn
    assert lines[0].endswith("1 (33% of the 3 ended) contributed none:")
    assert "1 failed with no sample received: simulation 2, exit codes" in lines[1]
    assert "1 given up part-way (redrawn), after sending some samples: simulation 1, " in lines[2]
    assert "parameters {'x': 0.9}" in lines[2]


def test_a_repeated_exit_code_reads_as_an_exit_code(caplog: pytest.LogCaptureFixture) -> None:
    from melissa_trainer.launcher.advice import Advice

    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    Advice(worker_mode=False).failed(7, [1, 1])
    (said,) = [one_line(r.getMessage()) for r in caplog.records]
    assert said.startswith("simulation 7 failed again (exit 1) on its restart"), said
    caplog.clear()
    Advice(worker_mode=False).failed(8, ["refused", "refused"])
    (said,) = [one_line(r.getMessage()) for r in caplog.records]
    assert said.startswith("simulation 8 failed again (refused) on its restart"), said


def test_simulations_that_failed_alike_show_their_exit_codes_as_numbers(tmp_path: Path) -> None:
    """A study stopped by failures groups those that failed alike: their exit codes read
    [1] (as every other line of the launcher writes them), not ['1']."""
    from melissa_trainer.launcher.reports import failure_report

    for sid in (0, 1):
        (tmp_path / f"sim-{sid}.log").write_text("setting up\nsolver diverged\n")
    failed = [(0, "simulation 0", (1, 1, 1)), (1, "simulation 1", (1, 1, 1))]
    lines = failure_report(failed, lambda sid: tmp_path / f"sim-{sid}.log", tmp_path)
    assert "2 simulations (0, 1) failed alike (exit codes [1], the same" in lines[0], lines
