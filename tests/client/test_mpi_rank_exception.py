"""An exception on one rank of an MPI solver while another rank is in the client's first
send (collective: its scan places the parts) ends the job only under
``python -m mpi4py`` (docs/how-to/own-solver.md, "An MPI solver").

Without it, the rank that raised prints its traceback and then waits in MPI_Finalize
(MPICH) for the others, which wait in the scan for it: the job hangs until the launcher
kills it as hung (its start-up allowance, 600 s by default). Seen in a user trial
(2026-12-06, hmpi): a solver that gave `Client` its communicator on rank 0 only. With
``-m mpi4py``, an uncaught exception calls MPI_Abort: the job ends at once, non-zero,
the traceback in its output, and the launcher's failure report quotes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec
from process_tree import processes_with
from waiting import wait_until

from melissa_trainer.launcher.backends.file_holders import holders

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: rank 1 fails before its first send (its own input, missing), once the test has seen
#: MPICH's files (each rank says it is past MPI_Init, the test answers "go"); rank 0
#: sends step 0
SOLVER = """
import sys, time
from pathlib import Path
import numpy as np
from mpi4py import MPI
from melissa_trainer.client import Client

comm = MPI.COMM_WORLD
here = Path(sys.argv[1])
(here / f"rank{comm.rank}").touch()
if comm.rank == 1:
    deadline = time.monotonic() + 60
    while not (here / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    raise FileNotFoundError("rank 1: its part of the mesh is missing")
with Client({"u": ((4,), "float32")}, {}, simulation_id=0,
            endpoints="tcp://127.0.0.1:9", comm=comm) as client:
    client.send(0, u=np.zeros(2, np.float32))  # (waits in the scan for rank 1)
"""
SAID = "rank 1: its part of the mesh is missing"


def _start(tmp_path: Path, *python_args: str) -> tuple[subprocess.Popen[bytes], Path]:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    (tmp_path / "solver.py").write_text(SOLVER)
    log = tmp_path / "job.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "OMP_NUM_THREADS": "1",
        "MT_TEST_JOB": str(tmp_path),
    }  # (the mark of its processes: `_go`)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [mpiexec, "-n", "2", sys.executable, *python_args, str(tmp_path / "solver.py"),
             str(tmp_path)],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    return proc, log


def _go(tmp_path: Path, proc: subprocess.Popen[bytes]) -> list[str]:
    """Once both ranks are past MPI_Init: the MPICH files in /dev/shm that the job's
    ranks hold (a job that ends before MPI_Finalize leaves them: `_clean` removes
    them, no other job's); then rank 1 may raise."""
    both = lambda: all((tmp_path / f"rank{r}").exists() for r in (0, 1))  # noqa: E731
    wait_until(both, "both ranks past MPI_Init", 90, procs=[proc])
    shm = Path("/dev/shm")
    mpich = [str(f) for f in shm.glob("mpich_*")] if shm.is_dir() else []
    held = holders(mpich) or {}
    ranks = set(processes_with(str(tmp_path)))  # (by their environment: MT_TEST_JOB)
    ours = [f for f, pids in held.items() if pids & ranks]
    (tmp_path / "go").touch()
    return ours


def _clean(proc: subprocess.Popen[bytes], files: list[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    for f in files:
        Path(f).unlink(missing_ok=True)


def test_under_m_mpi4py_one_rank_s_exception_ends_the_job(tmp_path: Path) -> None:
    proc, log = _start(tmp_path, "-m", "mpi4py")
    files: list[str] = []
    try:
        files = _go(tmp_path, proc)
        code = proc.wait(90)
    finally:
        _clean(proc, files)
    said = log.read_text()
    assert code != 0, said
    assert SAID in said, said
    assert "MPI_Abort" in said, said


def test_without_it_the_job_hangs_after_the_traceback(tmp_path: Path) -> None:
    # the oracle of the docs' warning: MPICH's behaviour, not the library's
    proc, log = _start(tmp_path)
    files: list[str] = []
    try:
        files = _go(tmp_path, proc)
        wait_until(lambda: SAID in log.read_text(), lambda: log.read_text(), 90, procs=[proc])
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(5)  # (a hang cannot be seen but over a while)
    finally:
        _clean(proc, files)
