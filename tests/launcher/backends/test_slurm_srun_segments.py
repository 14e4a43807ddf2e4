"""The Slurm backend's mode "srun" removes the MPICH segment that a killed or crashed
2-task step (``srun --mpi=pmi2``) leaves in /dev/shm, when its ranks ran on this node
(the one-node cluster of tests/slurm_cluster.py). The step's ranks run under
slurmstepd, not below the srun process that the backend watches, and MPICH names their
file after the step, ``<allocation>.<step id>``: before the backend learnt its steps'
ids (`steps.SrunSteps`) each such step left its file. The names are computed here from
the step id that squeue lists (`mpich_shm.segment_names`), independently of the
backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: each rank says it is past MPI_Init; then rank 1 kills itself (SIGKILL: a crash) once
#: the driver has created the file ``crash``, and the others wait to be killed
RANKS = """
import os, signal, time
from mpi4py import MPI
rank = MPI.COMM_WORLD.Get_rank()
open(f"rank{rank}.tmp", "w").close()
os.rename(f"rank{rank}.tmp", f"rank{rank}")
while rank == 1 and not os.path.exists("crash"):
    time.sleep(0.05)
if rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(300)
"""

#: run by salloc (inside an allocation of 2 tasks): one step killed by the backend, one
#: whose rank crashes; prints what it saw, as JSON
DRIVER = """
import json, os, subprocess, sys, time
from pathlib import Path
from melissa_trainer.launcher.backends import Job, SlurmBackend

ALLOCATION = os.environ["SLURM_JOB_ID"]


def until(condition, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def step_id(handle):
    listing = ["squeue", "-h", "-s", "-j", ALLOCATION, "-o", "%i %j"]
    lines = subprocess.run(listing, capture_output=True, text=True).stdout.splitlines()
    return {name: step for step, name in (line.split() for line in lines)}.get(
        handle.step_name
    )


def present(step):
    # MPICH's names for the step's segments on node 0: FNV-1a of "<job>.<step>"
    value = 2166136261
    for byte in step.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    names = [f"mpich_shm_{value:x}_0", f"mpich_vci_{value:x}_0"]
    return [name for name in names if os.path.exists("/dev/shm/" + name)]


backend = SlurmBackend(mode="srun", srun_args=["--mpi=pmi2"])
backend.begin_study("srunshm")
out = {}
for case in ("killed", "crashed"):
    here = Path(case).absolute()
    here.mkdir()
    (here / "ranks.py").write_text(sys.argv[1])
    job = Job(case, [sys.executable, "ranks.py"], cwd=here, ranks=2, log_path=here / "log")
    handle = backend.launch(job)
    until(lambda: (here / "rank0").exists() and (here / "rank1").exists(), "MPI_Init")
    step = until(lambda: step_id(handle), "the step listed")
    seen = {"step": step, "before": present(step)}
    if case == "killed":
        backend.kill(handle, grace=5)
    else:
        (here / "crash").touch()
    seen["code"] = until(lambda: backend.poll(handle), "the step's end")
    seen["at_end"] = present(step)
    seen["learnt"] = handle.step_id  # (the backend's, from squeue; None: never listed)
    # files still held when the end was handled are retried by later polls (up to 60 s)
    deadline = time.monotonic() + 60
    while present(step) and time.monotonic() < deadline:
        backend.poll(handle)
        time.sleep(0.1)
    seen["left"] = present(step)
    out[case] = seen
backend.close()
print(json.dumps(out))
"""


def in_allocation(
    cwd: Path, driver: str, tasks: int, *args: str, timeout: float
) -> tuple[Any, str]:
    """Run the Python source `driver` (as cwd/driver.py, with `args`) by salloc in an
    allocation of `tasks` tasks (5 minutes at most), within `timeout` s: the JSON of
    the last line it prints, and its stderr. Fails with that stderr unless it exits 0."""
    (cwd / "driver.py").write_text(driver)
    result = subprocess.run(
        ["salloc", f"--ntasks={tasks}", "--time=5", sys.executable, "driver.py", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


@pytest.mark.timeout(300)
def test_killed_and_crashed_srun_steps_leave_no_segment(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; a 2-task step needs 2")
    pytest.importorskip("mpi4py")
    out, _ = in_allocation(tmp_path, DRIVER, 2, RANKS, timeout=280)
    for case in ("killed", "crashed"):
        seen = out[case]
        log = (tmp_path / case / "log").read_text()
        assert seen["before"], f"{case}: no MPICH segment named after step {seen['step']}"
        assert seen["code"] not in (None, 0), (case, seen, log)
        assert not seen["left"], f"{case}: step {seen['step']} left {seen['left']}: {seen}"
    # the kill lists the steps first: the killed step's own id was swept, not a range
    killed = out["killed"]
    assert killed["step"].split(".")[1] == str(killed["learnt"]), killed
