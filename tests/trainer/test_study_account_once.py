"""The end of a study with a solver that crashes part-way for some parameters, under a
real `OnlineTrainer`: the study's account is said once (the trainer stops its source
twice, and a WARNING account was logged twice), and it names the simulation given up,
with the parameters the solver was given (its own record: the oracle)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from helpers import Keys
from study_runs import study_trainer

from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: simulation 1 sends its first step, records its parameters, and exits 1 (an
#: exception leaving the with block waits for what is queued: its step arrives)
SOLVER = r"""
import json, os, sys
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(4):
        x = np.array([sid, t, 1.0], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
        if sid == 1:
            Path(os.environ["CRASHED"]).write_text(json.dumps(dict(client.parameters)))
            sys.exit(1)
"""


@pytest.mark.timeout(180)
def test_the_account_of_a_study_with_a_crash_is_said_once_and_names_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    crashed = tmp_path / "crashed.json"
    launcher = Launcher(
        [sys.executable, str(script)],
        [{"a": 0.1}, {"a": 0.7}, {"a": 0.2}, {"a": 0.3}],
        3,
        job_limit=1,
        backend=LocalBackend(),
        env={"CRASHED": str(crashed)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    keys = Keys()
    study_trainer(launcher, tmp_path / "out", keys).train()
    assert (1, 0) in keys.seen  # the crashed simulation's step was trained on
    said = [r for r in caplog.records if r.getMessage().startswith("study account")]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].levelno == logging.WARNING
    lines = said[0].getMessage().splitlines()
    assert lines[0].endswith("1 (25% of the 4 ended) failed part-way:"), lines
    parameters = json.loads(crashed.read_text())
    assert f"simulation 1, exit codes [1], parameters {parameters}" in lines[1], lines
