"""The heat example in worker mode on the Slurm backend (``--worker --backend slurm``),
end to end on a real one-node Slurm cluster (tests/slurm_cluster.py): each worker is a
Slurm job asking the launcher for simulations over CURVE-encrypted TCP. One worker
SIGKILLs itself mid-simulation (its job's command dies), another cancels its own job
(``scancel``) mid-simulation: both simulations are run again by another worker, every
simulation is trained, each (simulation, step) once, and once the study is over no
worker job is left in the queue and no worker process on the node.

The kills are the test-only sitecustomize's (tests/scripts/tampered_solvers): at a
chosen (simulation, step), once in the study, a file marking that it happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_tree import processes_with
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.xdist_group("slurm"),  # (one cluster at a time: one xdist worker)
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
]

TESTS = Path(__file__).parents[1]
EXAMPLE = TESTS.parent / "examples" / "heat_pde" / "train.py"
TAMPERED_SOLVERS = TESTS / "scripts" / "tampered_solvers"  # a sitecustomize.py
SIMULATIONS, STEPS = 6, 10
FLAGS = [
    "--worker", "--backend", "slurm",
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "6",
    "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "64", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", "4", "--eval_steps", "none",
    "--logging_steps", "50", "--disable_progress_bar", "--json",
]  # fmt: skip


def queue() -> str:
    """Jobs the cluster still has queued or running: "ID NAME STATE" lines."""
    result = subprocess.run(["squeue", "-h", "-o", "%i %j %T"], capture_output=True, text=True)
    return result.stdout.strip()


def no_job_left() -> str:
    """The queue once the jobs Slurm is still tidying up after (COMPLETING: their
    processes ended, the epilog runs) are gone, at most 60 s later: "" when none is
    left. A job still PENDING or RUNNING is returned at once (a worker left behind; the
    lease watchdog would cancel it only 300 s after the trainer's exit)."""
    deadline = time.monotonic() + 60
    while (left := queue()) and time.monotonic() < deadline:
        if any(not line.endswith("COMPLETING") for line in left.splitlines()):
            return left
        time.sleep(0.1)
    return left


@pytest.mark.timeout(240)
def test_heat_example_in_worker_mode_on_slurm_reruns_killed_and_cancelled_workers_simulations(
    slurm_cluster: SlurmCluster,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    out, killed, cancelled = tmp_path / "out", tmp_path / "killed", tmp_path / "cancelled"
    path = os.pathsep.join(filter(None, [str(TAMPERED_SOLVERS), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": path,
           "SOLVER_WORKER_KILL": f"1:3:{killed}",
           "SOLVER_WORKER_SCANCEL": f"3:4:{cancelled}"}  # fmt: skip
    cmd = [sys.executable, str(EXAMPLE), *FLAGS, "--output_dir", str(out)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=200, cwd=tmp_path, env=env
        )
        text = proc.stdout[-3000:] + proc.stderr[-5000:]
        assert proc.returncode == 0, text
        assert killed.exists() and cancelled.exists(), text  # both happened, mid-simulation
        summary = json.loads(
            [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
        )
        study = summary["study"]
        assert study["finished"] == SIMULATIONS and study["running"] == 0, study
        assert study["restarts"] == 2, study  # the killed and the cancelled, run again
        assert study["failed"] == study["redraws"] == study["abandoned"] == 0, study
        assert summary["samples_received"] == SIMULATIONS * STEPS  # each (sim, step) once
        logs = sorted(p.name for p in (out / "study" / "logs").glob("*.log"))
        assert logs and all(name.startswith("worker-") for name in logs), logs
        # the workers' jobs ended with the study: none queued, none running
        assert (left := no_job_left()) == "", left
        assert processes_with(str(out / "rendezvous")) == []
    finally:
        if queue():  # (a failed test's leftovers, never a passing one's)
            subprocess.run(["scancel", "--full", "--user", str(os.getuid())], check=False)


@pytest.mark.timeout(300)
def test_a_preempted_worker_study_on_slurm_leaves_no_job_and_resumes_to_its_end(
    slurm_cluster: SlurmCluster,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    path = os.pathsep.join(filter(None, [str(TAMPERED_SOLVERS), os.environ.get("PYTHONPATH")]))
    paced = {**env, "PYTHONPATH": path, "SOLVER_STEP_SLEEP": "0.2"}  # workers mid-study
    cmd = [sys.executable, str(EXAMPLE), *FLAGS, "--save_steps", "2", "--output_dir", str(out)]
    try:
        with open(tmp_path / "first.out", "w") as output:
            first = subprocess.Popen(cmd, cwd=tmp_path, env=paced, stdout=output, stderr=output)
            try:
                deadline = time.monotonic() + 120
                # a checkpoint written, and both workers' jobs running
                while not (
                    list((out / "checkpoints").glob("checkpoint-*"))
                    and len([x for x in queue().splitlines() if x.endswith("RUNNING")]) == 2
                ):
                    assert first.poll() is None, (tmp_path / "first.out").read_text()[-3000:]
                    assert time.monotonic() < deadline, (tmp_path / "first.out").read_text()
                    time.sleep(0.1)
                first.send_signal(signal.SIGTERM)  # preempted: a checkpoint, then exit
                code = first.wait(120)
            finally:
                if first.poll() is None:
                    first.kill()
                    first.wait()
        text = (tmp_path / "first.out").read_text()
        assert code != 0 and "preempted by SIGTERM" in text, text[-3000:]
        # the trainer cancelled its workers' jobs on its way out
        assert (left := no_job_left()) == "", left
        assert processes_with(str(out / "rendezvous")) == []
        second = subprocess.run(
            [*cmd, "--resume_from_checkpoint", "latest"],
            capture_output=True, text=True, timeout=200, cwd=tmp_path, env=env,
        )  # fmt: skip
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        summary = json.loads([x for x in second.stdout.splitlines() if x.startswith("{")][-1])
        assert summary["resumed_from"], summary
        study = summary["study"]
        assert study["finished"] == SIMULATIONS and study["running"] == 0, study
        assert summary["samples_received"] == SIMULATIONS * STEPS  # each (sim, step) once
        assert (left := no_job_left()) == "", left
        assert processes_with(str(out / "rendezvous")) == []
    finally:
        if queue():  # (a failed test's leftovers, never a passing one's)
            subprocess.run(["scancel", "--full", "--user", str(os.getuid())], check=False)
