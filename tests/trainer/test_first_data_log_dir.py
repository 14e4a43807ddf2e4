"""The first-data notice (a slow start-up: training waits, said once) names where the
solvers' output is: the launcher's own `log_dir` when the user gave one. It named
`{study_dir}/logs` "by default" whatever the launcher wrote to, so a user with a slow
solver was sent to a directory that held no log of it."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest
from helpers import read_source

from melissa_trainer import FIFOBuffer, Launcher, LauncherTuning, Study
from melissa_trainer.launcher import LocalBackend

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: a slow start-up the test controls: nothing is sent until the file `go` exists
SLOW_START = r"""
import sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

print("setting up the mesh", flush=True)
go = Path(sys.argv[1])
while not go.exists():
    time.sleep(0.02)
with Client({"x": ((2,), "float32")}) as client:
    for t in range(2):
        client.send(t, x=np.array([client.parameters["a"], t], np.float32))
"""


@pytest.mark.timeout(90)
def test_the_first_data_notice_names_the_launchers_own_log_dir(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script, go, logs = tmp_path / "sim.py", tmp_path / "go", tmp_path / "my-logs"
    script.write_text(SLOW_START)
    launcher = Launcher(
        [sys.executable, str(script), str(go)],
        [{"a": 0.0}],
        1,
        backend=LocalBackend(),
        log_dir=logs,
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    study = Study(launcher)
    study.first_data.after = 0.2
    buffer = FIFOBuffer(64)
    study.configure(str(tmp_path / "out"))
    study.start(buffer, 0, 1)
    caplog.set_level(logging.WARNING, logger="melissa_trainer.study")
    try:
        study.on_all_ranks_started()
        deadline = time.monotonic() + 60
        while "no data yet" not in caplog.text:
            assert time.monotonic() < deadline, "no notice while waiting for the first data"
            study.wait_for(8, 0.05)
        go.touch()
        assert len(read_source(study, buffer)) == 2
    finally:
        study.stop()
    (notice,) = [r.getMessage() for r in caplog.records if "no data yet" in r.getMessage()]
    assert f"the launcher's log_dir ({logs})" in notice, notice
    assert "setting up the mesh" in (logs / "sim-0.log").read_text()  # the oracle
