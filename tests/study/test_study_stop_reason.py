"""A `Study`'s receivers record why it stopped (`Study.note_stop`; docs/protocol.md,
section 2, "The stop record"): the trainer tells its source why it stops ("end",
"preempted", "error": `trainer.ending`, `trainer.failing`), and a study passes it to
its stream. Before, a study ignored it (the `Source` default) and every study's stop
record said "stopped", so that a simulation closing as the study ended or failed waited
as for a trainer that might come back. The oracle is the rendezvous file the receiver
wrote, read as JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import read_source
from stop_records import record_trainer, stop_reason

from melissa_trainer import FIFOBuffer, OnlineTrainer, SourceError, Study
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

pytestmark = [
    pytest.mark.e2e,  # (real simulation processes)
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
]

SIMULATION = r"""
import json, os, sys
import numpy as np
from melissa_trainer.client import Client

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
if a == float(os.environ.get("SIM_FAIL", "-1")):
    sys.exit(3)
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(4):
        x = np.array([a, t, 0.0], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
"""


def launcher(tmp_path: Path, n: int, fail: int = -1) -> Launcher:
    script = tmp_path / "sim.py"
    script.write_text(SIMULATION)
    return Launcher(
        [sys.executable, str(script)],
        [{"a": float(i)} for i in range(n)],
        n,
        job_limit=2,
        backend=LocalBackend(),
        env={"SIM_FAIL": str(fail)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )


def trainer(tmp_path: Path, study: Study) -> OnlineTrainer:
    return record_trainer(tmp_path, study, buffer_size=64)


@pytest.mark.timeout(120)
def test_a_study_that_ended_records_end(tmp_path: Path) -> None:
    t = trainer(tmp_path, Study(launcher(tmp_path, 2)))
    t.train()
    said = stop_reason(tmp_path / "out" / "rendezvous")
    assert said == {"code": "end", "message": "end of stream"}  # (before: "stopped")


@pytest.mark.timeout(120)
def test_a_study_that_failed_records_error_with_its_failure(tmp_path: Path) -> None:
    t = trainer(tmp_path, Study(launcher(tmp_path, 2, fail=1)))
    with pytest.raises(SourceError, match="the simulation study failed"):
        t.train()
    said = stop_reason(tmp_path / "out" / "rendezvous")
    assert said["code"] == "error"  # (before: "stopped")
    assert "the simulation study failed" in said["message"]


@pytest.mark.timeout(60)
def test_a_preempted_study_records_preempted(tmp_path: Path) -> None:
    """What `end_training` tells a preempted run's source (a signal is not sent here:
    the trainer's part is `tests/trainer`'s; this is the study's)."""
    study = Study(launcher(tmp_path, 2))
    buffer = FIFOBuffer(8)
    study.configure(str(tmp_path / "out"))
    study.start(buffer, 0, 1)
    try:
        study.on_all_ranks_started()
        read_source(study, buffer)  # (every sample: the stream ended)
        study.note_stop("preempted", "stopped by SIGTERM")
    finally:
        study.stop()
    said = stop_reason(tmp_path / "out" / "rendezvous")
    assert said == {"code": "preempted", "message": "stopped by SIGTERM"}
