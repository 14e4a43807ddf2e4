"""The ranks of one MPI simulation that disagree on their communicator stop the study at
once, whichever HELLO comes first (`twin_causes.ranks_disagree`, `stop_for_solver`).

Reproduced with ``mpiexec -n 2`` (2026-12-06, hmpi3): rank 0 built its Client with
``comm=MPI.COMM_WORLD`` (it says client rank 0 of 2), rank 1 without it (rank 0 of 1).
Rank 0 waits at its first send's collective for a rank that never joins it. With rank
0's HELLO first, rank 1's was refused (``hello_mismatch``) and the attempt was killed for
its silence after 121.7 s (``silence_floor``), to be restarted into the same hang; with
rank 1's first, the simulation finished on rank 1's steps alone, unwarned (its BYE read
before rank 0's HELLO: no twin either), and its job was killed after 600.1 s
(``startup_timeout``, the bound once its data is complete), the study reported done.

The order is the test's: the rank that goes second waits for a file, written once the
receiver has the first rank's HELLO (its ledger: `Receiver.waiting_for`), or has the
whole simulation from it (`Receiver.completed`). The oracle: the study's error (the cause
and its fix, no restart) and the solver's own log (rank 0 never got past its first send).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec
from launcher_runs import FAST, failure
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.launcher.backends import MpiexecBackend
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc"),
]

#: simulation 0: rank 0 on the communicator, rank 1 without it; argv[1]: the rank whose
#: HELLO comes first (the other waits for the file argv[2]); any other simulation: both
#: ranks on it
SOLVER = r"""
import os, sys, time
from pathlib import Path
import numpy as np
from mpi4py import MPI
from melissa_trainer.client import Client

comm = MPI.COMM_WORLD
first, go = int(sys.argv[1]), Path(sys.argv[2])
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
if sid == 0 and comm.rank != first:
    while not go.exists():
        time.sleep(0.01)
client = Client({"u": ((4,), "float32")}, comm=comm if comm.rank == 0 or sid else None)
print(f"rank {comm.rank}: client rank {client.rank} of {client.ranks}", flush=True)
for t in range(3):
    client.send(t, u=np.full(4 // client.ranks, t, np.float32))
client.close()
print(f"rank {comm.rank}: closed", flush=True)
"""


def stopped_study(tmp_path: Path, first: int) -> tuple[str, Launcher]:
    """The error of a study of 2 simulations (one job at a time) whose simulation 0's
    rank `first` says HELLO first; the other rank starts once the receiver has rank 0's
    HELLO (`first` 0) or all of simulation 0 from rank 1 (`first` 1)."""
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    (tmp_path / "solver.py").write_text(textwrap.dedent(SOLVER))
    go = tmp_path / "go"
    # 2 expected: a stream that ended with simulation 0 would read no later HELLO of it
    config = ReceiverConfig(expected_simulations=2, rendezvous_dir=tmp_path / "rendezvous")
    receiver = Receiver(FIFOBuffer(100), config=config)
    receiver.start()
    receiver.report_refusals_to_launcher()  # (as a Study does)
    launch = Launcher(
        [sys.executable, str(tmp_path / "solver.py"), str(first), str(go)],
        make_sampler("uniform", {"x": (0, 1)}, seed=0),
        2,
        job_limit=1,
        backend=MpiexecBackend(mpiexec),
        ranks_per_simulation=2,
        tuning=FAST,  # (the failure policy's defaults: restarts, redraws, silence bounds)
    )
    launch.start(
        tmp_path / "rendezvous",
        heartbeat=receiver.activity,
        abandon=lambda sid: None,
        data=receiver,
        study_dir=tmp_path / "study",
    )
    try:
        ready = receiver.waiting_for if first == 0 else receiver.completed
        wait_until(lambda: 0 in ready(), "the first rank's HELLO or data", 60)
        go.touch()
        return str(failure(launch, timeout=60)), launch
    finally:
        launch.stop()
        receiver.stop()


def check(message: str, launch: Launcher, tmp_path: Path, counts: str) -> None:
    headline = message.splitlines()[0]
    assert headline.startswith(
        "the study stopped: simulation 0: the ranks of this simulation disagree on their "
        f"communicator: a HELLO says {counts}; a rank that says it is rank 0 of 1 built its "
        "client without the communicator (Python: Client(..., comm=comm); C: "
        "mt_client_start_mpi; Fortran: mt_start_mpi)"
    ), headline
    assert "Build every rank's client on the same communicator" in headline
    assert headline.endswith("Its solver would do the same in every simulation: not restarted")
    record = records_of(launch.state_dict())[0]
    assert record["exit_codes"] == ["refused"], record  # one attempt: not restarted
    later = records_of(launch.state_dict()).get(1, {})
    assert later.get("attempts", 0) == 0, later  # the study stopped before it
    log = (tmp_path / "study" / "logs" / "sim-0.log").read_text()
    # rank 0 was on the communicator and never ended its first send: killed, as hung
    assert "rank 0: client rank 0 of 2" in log and "rank 0: closed" not in log, log


def test_the_ranks_hello_on_the_communicator_first(tmp_path: Path) -> None:
    message, launch = stopped_study(tmp_path, first=0)
    check(
        message, launch, tmp_path, "client rank 0 of 1, where its first HELLO said 2 client ranks"
    )


def test_the_rank_without_it_first_having_sent_the_whole_simulation(tmp_path: Path) -> None:
    message, launch = stopped_study(tmp_path, first=1)
    check(message, launch, tmp_path, "client rank 0 of 2, where its first HELLO said 1 client rank")
    log = (tmp_path / "study" / "logs" / "sim-0.log").read_text()
    assert "rank 1: closed" in log, log  # (its simulation complete on its steps alone)
