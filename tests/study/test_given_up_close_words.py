"""A simulation that the launcher gives up for good (``max_restarts=0``) after its
connection closed without a BYE is never promised a rerun by the receiver's line: the
close is judged before the launcher decides, so the line says its data is lost *unless*
it runs again (a user trial read "its data lost until it runs again" of simulations the
launcher had given up, which never ran again).

Nor is what arrived said lost (a new-user trial, severity LOW): the count at the end said
"2 simulations warned of: a connection closed before its BYE, its data lost unless it
runs again" right after the study account's "The samples they sent before failing were
trained on". The lines now say what the receiver knows: the steps received before the
close are kept for training, the rest of the run is missing unless it runs again; and by
the count at its stop the receiver has heard the launcher give them up, which it says
(`connection_lines.fate_in`)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from study_runs import study_trainer

from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: simulations 1 and 2 send a step and exit 1 inside the client (no BYE): given up
SOLVER = r"""
import os, sys
import numpy as np
from melissa_trainer.client import Client

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(4):
        x = np.array([sid, t, 1.0], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
        if sid in (1, 2):
            sys.exit(1)
"""


@pytest.mark.timeout(180)
def test_a_given_up_simulation_is_not_promised_a_rerun(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(script)],
        [{"a": 0.1}, {"a": 0.7}, {"a": 0.2}, {"a": 0.3}, {"a": 0.4}],
        3,
        job_limit=1,
        backend=LocalBackend(),
        tuning=LauncherTuning(
            poll_interval=0.05, kill_grace=2.0, max_restarts=0, min_finished_fraction=0.2
        ),
    )
    study_trainer(launcher, tmp_path / "out").train()
    receiver = [
        r.getMessage() for r in caplog.records if r.name == "melissa_trainer.stream.receiver"
    ]
    lost = [m for m in receiver if "closed before its BYE" in m]
    assert any(m.startswith("simulation 1 client rank 0") for m in lost), receiver
    assert any(m.startswith("simulation 2 client rank 0") for m in lost), receiver
    for line in lost:  # (the count, last, knows they were given up: no "unless")
        assert "until" not in line and ("unless" in line or line is lost[-1]), line
        assert "data lost" not in line and "data is lost" not in line, line
    assert lost[-1] == (
        "2 simulations warned of: a connection closed before its BYE, the steps received "
        "before it kept for training; given up by the launcher since, the rest of their "
        "runs missing"
    ), lost
