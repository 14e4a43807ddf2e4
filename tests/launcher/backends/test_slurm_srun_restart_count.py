"""What a ``mode="srun"`` simulation sees when Slurm requeues its trainer's batch job, on
the one-node test cluster (tests/slurm_cluster.py).

A requeued batch job runs its script again with ``SLURM_RESTART_COUNT`` set (1 at the
first requeue). A ``mode="srun"`` study's simulations are steps of that job, started by
`SlurmBackend`'s srun, which passes the trainer's environment on: so every simulation of
the requeued trainer, a first attempt included, reads ``SLURM_RESTART_COUNT`` = 1 and
is, for the HELD skip, a rerun (`client.launched_env.requeued`). Harmless: it asks each
receiver once which of its steps it holds, is told none, and sends every step
(tests/client/test_held_rerun_skips.py, the first run in a requeued allocation). This
pins Slurm's side: the step of the first run reads 0, the step of the requeued run 1.

Here the "trainer" is a batch job (`TRAINER`) that launches one step through
`SlurmBackend(mode="srun")` as a study does (``MELISSA_TRAINER_ATTEMPT=0``: a first
attempt), waits for its end, then, in its first run, waits to be requeued. The oracle:
the file each step appends `check_restart_count` to, and the trainer's own count."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: the simulation: appends what the client reads (a launched first attempt) to steps.txt
PROBE = """
from melissa_trainer.client.launched_env import check_restart_count, requeued
with open("steps.txt", "a") as f:
    f.write(f"{check_restart_count()} {requeued()}\\n")
"""

#: the trainer's batch job: one srun step (the probe) through the backend, then, in its
#: first run (runs.txt written by it: its own SLURM_RESTART_COUNT), sleep until requeued
TRAINER = f"""
import os, sys, time
from melissa_trainer.launcher.backends import Job, SlurmBackend
with open("runs.txt", "a+") as f:
    f.seek(0)
    n = sum(line.startswith("run") for line in f.read().splitlines())
    f.write(f"run {{n}} restart={{os.environ.get('SLURM_RESTART_COUNT')}}\\n")
backend = SlurmBackend(mode="srun", poll_every={POLL})
backend.begin_study("restart_count")
env = {{"MELISSA_TRAINER_ATTEMPT": "0"}}
step = backend.launch(Job("sim-0", [sys.executable, "-c", {PROBE!r}], env=env, cwd="."))
while (code := backend.poll(step)) is None:
    time.sleep(0.05)
backend.close()
with open("runs.txt", "a") as f:
    f.write(f"step {{code}}\\n")
if n == 0:
    time.sleep(600)
"""


@pytest.mark.timeout(240)
def test_the_steps_of_a_requeued_trainer_read_its_restart_count(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path / "scripts")
    backend.begin_study("requeued_trainer")
    runs, steps = tmp_path / "runs.txt", tmp_path / "steps.txt"

    def lines(path: Path) -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    try:
        handle = backend.launch(Job("trainer", [sys.executable, "-c", TRAINER], cwd=tmp_path))
        assert isinstance(handle, SlurmHandle)
        wait_until(
            lambda: len(lines(runs)) == 2 or backend.poll(handle) is not None,
            what=lambda: f"the first run's step; runs.txt: {lines(runs)}",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        assert lines(runs) == ["run 0 restart=None", "step 0"], lines(runs)
        slurm_cluster.run("scontrol", "requeue", handle.job_id)
        wait_until(
            lambda: backend.poll(handle) is not None,
            what=lambda: f"the requeued run's end; runs.txt: {lines(runs)}",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        assert backend.poll(handle) == 0, lines(runs)
    finally:
        backend.close()
    assert lines(runs) == ["run 0 restart=None", "step 0", "run 1 restart=1", "step 0"]
    # the first run's step reads 0; the requeued run's, a first attempt, 1: a rerun
    assert lines(steps) == ["0 False", "1 True"], lines(steps)
