"""The mpiexec backend from a trainer inside a Slurm job step (trial F7): hydra saw the
step's ``SLURM_*`` variables and started its proxy with a nested ``srun``, a new step
that waits for the CPUs the trainer's step holds: the simulations never started and the
trainer waited ``startup_timeout``. On a one-node allocation the jobs now get
``HYDRA_LAUNCHER=fork`` (`launcher.backends.hydra_step`); on several nodes nothing is
changed and a WARNING says what will happen. Against the real one-node cluster
(tests/slurm_cluster.py): a "trainer" run by ``srun`` holding every CPU of the node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture

from melissa_trainer.launcher.backends.hydra_step import hydra_step_env

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

MPIEXEC = find_mpiexec()

#: the trainer's part: one 2-rank job through MpiexecBackend, given `WAIT` s to end (it
#: ends in about a second; a nested srun waiting for CPUs never would)
TRAINER = """
import logging, sys, time
from melissa_trainer.launcher.backends import Job, MpiexecBackend
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stdout)
backend = MpiexecBackend(sys.argv[1])
# one write per rank (a print's pieces from two ranks interleaved in the shared log)
code = ("import os; v = os.environ.get('HYDRA_LAUNCHER'); "
        "os.write(1, f'rank ran, HYDRA_LAUNCHER {v}{chr(10)}'.encode())")
handle = backend.launch(Job("sim-0", [sys.executable, "-c", code], log_path=sys.argv[2], ranks=2))
deadline = time.monotonic() + float(sys.argv[3])
while (status := backend.poll(handle)) is None and time.monotonic() < deadline:
    time.sleep(0.05)
print("job exit", status, flush=True)
backend.close()
"""
WAIT = 30.0


@pytest.mark.skipif(MPIEXEC is None, reason=NO_MPI)
@pytest.mark.timeout(120)
def test_a_trainer_in_a_one_node_step_starts_its_mpiexec_jobs(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert MPIEXEC is not None
    (tmp_path / "trainer.py").write_text(TRAINER)
    log = tmp_path / "sim-0.log"
    step = subprocess.run(
        # the trainer's step holds every CPU of the node, as `srun python train.py` in a
        # job of that size does (trial F7: --ntasks=1 --cpus-per-task=2)
        ["srun", "-N", "1", "-n", "1", f"--cpus-per-task={slurm_cluster.cpus}",
         sys.executable, str(tmp_path / "trainer.py"), MPIEXEC, str(log), str(WAIT)],
        capture_output=True, text=True, timeout=WAIT + 60, cwd=tmp_path,
    )  # fmt: skip
    out = step.stdout + step.stderr
    assert "job exit 0" in out, out + (log.read_text() if log.exists() else "(no log)")
    assert log.read_text().count("rank ran, HYDRA_LAUNCHER fork") == 2
    assert "INFO the trainer runs in Slurm job step" in out and "on one node" in out


def test_the_launcher_is_left_to_the_user_and_several_nodes_are_warned_of() -> None:
    step = {"SLURM_JOB_ID": "21", "SLURM_STEP_ID": "0", "SLURM_JOB_NUM_NODES": "1"}
    env, line, warn = hydra_step_env(step, [])
    assert env == {"HYDRA_LAUNCHER": "fork"} and line is not None and not warn
    # not in a step (the batch script itself: hydra's srun is then Slurm's ordinary way)
    assert hydra_step_env({"SLURM_JOB_ID": "21", "SLURM_JOB_NUM_NODES": "1"}, []) == (
        {}, None, False,
    )  # fmt: skip
    assert hydra_step_env({}, []) == ({}, None, False)
    # the user chose the launcher, or the hosts
    for environ, args in [
        ({"HYDRA_LAUNCHER": "ssh"}, []),
        ({"HYDRA_BOOTSTRAP": "slurm"}, []),
        ({}, ["-launcher", "slurm"]),
        ({}, ["--launcher=ssh"]),
        ({}, ["-hosts", "a,b"]),
        ({}, ["-f", "hosts.txt"]),
    ]:
        assert hydra_step_env({**step, **environ}, args) == ({}, None, False), (environ, args)
    # several nodes: fork would put every rank on this node: said, not done
    env, line, warn = hydra_step_env({**step, "SLURM_JOB_NUM_NODES": "4"}, ["-bind-to", "none"])
    assert env == {} and warn and line is not None
    assert "allocation of 4 nodes" in line and '["-launcher", "fork"]' in line
