"""Trial F1 as it happened: an MPI solver run by `SlurmBackend` without ``srun
--mpi=pmi2`` (the test cluster's ``MpiDefault=none``) runs as two singletons, each rank 0
of 1, each streaming the whole simulation: the study "succeeded", every step received
twice, with no warning. Now rank 0's receiver warns once, naming srun's --mpi. Each
singleton holds its connection open (after its HELLO) until the test saw the warning, or
60 s: both HELLOs are read while both connections are open, whatever the timing."""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

SOLVER = """
import os, sys, time
import numpy as np
from mpi4py import MPI
from melissa_trainer.client import Client

comm = MPI.COMM_WORLD  # a singleton's: rank 0 of 1, in each of the job's two tasks
go = os.path.join(sys.argv[1], "go")
with Client({"u": ((8,), "float64")}, comm=comm, send_timeout=60) as client:
    deadline = time.monotonic() + 60  # (before the fix no one writes `go`)
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    for step in range(4):
        client.send(step, u=np.full(8, float(step)))
print("rank", comm.Get_rank(), "of", comm.Get_size(), flush=True)
"""


class Warned(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.twin = threading.Event()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.lines.append(message)
        if "said HELLO as client rank" in message:
            self.twin.set()


@pytest.mark.timeout(150)
def test_an_mpi_solver_run_as_singletons_under_slurm_is_warned_of(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; a 2-task job needs 2")
    pytest.importorskip("mpi4py")
    (tmp_path / "solver.py").write_text(SOLVER)
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    warned, level = Warned(), receiver_log.level
    receiver_log.addHandler(warned)
    receiver_log.setLevel(logging.INFO)
    buffer = FIFOBuffer(100)
    receiver = Receiver(
        buffer, config=ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path / "rdv")
    )
    launcher = Launcher(
        [sys.executable, str(tmp_path / "solver.py"), str(tmp_path)],
        [{"a": 0.0}],
        1,
        backend=SlurmBackend(poll_every=0.2, time_limit=5),  # no srun_args: singletons
        ranks_per_simulation=2,
        log_dir=tmp_path / "logs",
        tuning=LauncherTuning(max_restarts=0, on_failure="raise"),
    )
    receiver.start()
    samples = []
    try:
        launcher.start(tmp_path / "rdv", heartbeat=receiver.activity, study_dir=tmp_path)
        deadline = time.monotonic() + 100
        ended = False
        while not (ended and launcher.done):
            if warned.twin.is_set() and not (tmp_path / "go").exists():
                (tmp_path / "go").write_text("")
            launcher.check()
            receiver.check()
            assert time.monotonic() < deadline, (launcher.summary(), len(samples))
            try:
                batch = buffer.get_batch(16, timeout=0.2)
            except TimeoutError:
                continue
            samples += batch
            ended = ended or not batch
        telemetry = receiver.telemetry()
    finally:
        launcher.stop()
        receiver.stop()
        receiver_log.removeHandler(warned)
        receiver_log.setLevel(level)
    log = (tmp_path / "logs" / "sim-0.log").read_text()
    assert log.count("rank 0 of 1") == 2, log  # the singletons, as in the trial
    keys = sorted(int(s["time_step"]) for s in samples)
    assert keys == [0, 1, 2, 3]
    # the other singleton's steps: duplicates, or ignored once the first one's BYE ended
    # the stream (nothing told the user either way)
    assert telemetry["duplicates"] + telemetry["ignored_after_end"] >= 1, telemetry
    twins = [line for line in warned.lines if "said HELLO as client rank" in line]
    assert len(twins) == 1, warned.lines
    assert twins[0].startswith("simulation 0: a second connection said HELLO as client rank 0")
    assert 'SlurmBackend(srun_args=["--mpi=pmi2"])' in twins[0]
    np.testing.assert_array_equal(samples[0]["u"], np.full(8, float(int(samples[0]["time_step"]))))
