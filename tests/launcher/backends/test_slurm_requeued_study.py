"""A study's simulation job that Slurm requeues after it has sent some of its steps
(``scontrol requeue``: an administrator's, or Slurm's own after a node failure under
the default ``JobRequeue=1``), on the one-node test cluster (tests/slurm_cluster.py).

What a user expects: the requeue is said once, naming the job and the node it ran on;
the job keeps its attempt (no restart counted, no failure of the node); it waits in the
queue as a queued job does, not as a silent one (the test cluster holds a requeued job
at least its ``cred_expire``, 5 s; 120 s by default); and its rerun, which skips the
steps the receiver holds but its first (test_slurm_requeued_skip.py), leaves each
(simulation, step) trained on once (the receiver drops what comes twice). Failed
before: the launcher counted the requeued job's wait in the queue as its silence since
its last message (the job had sent), killed it as hung after `simulation_timeout` (3 s
here) and restarted it ("restarts": 1).

Oracles independent of the launcher: the samples the buffer gave (each step once), the
file each run of the solver appends to (two runs), the queue (the job's id as squeue
lists it)."""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

import pytest
from launcher_said import one_line
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, PYTHON, queue

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.tuning import LauncherTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

STEPS = 5
#: the solver: argv its directory. Its first run sends steps 0 and 1, writes "sent",
#: then sends step 1 again every 0.2 s (a duplicate, dropped by the receiver but heard
#: by the launcher: a sign of life, so that its wait for the requeue is not a silence)
#: until the requeue ends it; its second run sends every step and exits 0
SIMULATION = f"""
import sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

here = Path(sys.argv[1])
with open(here / "runs.txt", "a+") as f:
    f.seek(0)
    run = len(f.read().splitlines())
    f.write(f"run {{run}}\\n")
with Client({{"u": ((8,), "float64")}}, send_timeout=30) as client:
    for step in range({STEPS}):
        client.send(step, u=np.full(8, float(step)))
        if run == 0 and step == 1:
            (here / "sent").touch()
            while True:
                time.sleep(0.2)
                client.send(1, u=np.full(8, 1.0))
"""


def _job_id() -> str:
    """The id of the study's one simulation job, as squeue lists it."""
    (line,) = [line for line in queue().splitlines() if "-sim-0" in line]
    return line.split()[0]


@pytest.mark.timeout(240)
def test_a_requeued_simulation_keeps_its_attempt_and_trains_each_step_once(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    (tmp_path / "sim.py").write_text(SIMULATION)
    buffer = FIFOBuffer(100)
    receiver = Receiver(
        buffer, config=ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path / "rdv")
    )
    launcher = Launcher(
        [PYTHON, str(tmp_path / "sim.py"), str(tmp_path)],
        [{"a": 0.0}],
        1,
        backend=SlurmBackend(poll_every=POLL, script_dir=tmp_path / "scripts"),
        log_dir=tmp_path / "logs",
        # 3 s between two messages; a start-up (the rerun's too) may take 60 s on a
        # loaded machine. A kill would be restarted once: counted, not raised
        tuning=LauncherTuning(
            simulation_timeout=3, startup_timeout=60, max_restarts=1, on_failure="raise"
        ),
    )
    receiver.start()
    samples: list[dict] = []  # type: ignore[type-arg]
    requeued = None
    try:
        launcher.start(tmp_path / "rdv", heartbeat=receiver.activity, study_dir=tmp_path)
        deadline = time.monotonic() + 200
        ended = False  # the stream: the receiver closes the buffer after the simulation
        while not (ended and launcher.done):
            launcher.check()
            receiver.check()
            assert time.monotonic() < deadline, (launcher.summary(), len(samples))
            if requeued is None and (tmp_path / "sent").exists():
                requeued = _job_id()
                slurm_cluster.run("scontrol", "requeue", requeued)
            try:
                batch = buffer.get_batch(16, timeout=0.2)
            except TimeoutError:
                continue
            samples += batch
            ended = ended or not batch
    finally:
        launcher.stop()
        receiver.stop()
    launcher.check()
    assert (tmp_path / "runs.txt").read_text().splitlines() == ["run 0", "run 1"]
    keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == [(0, step) for step in range(STEPS)]  # each once, the rerun's dropped
    messages = [one_line(r.getMessage()) for r in caplog.records]  # (cut at 100 columns)
    killed = [m for m in messages if "silent for" in m]
    assert not killed, killed  # (failed before: killed as silent while queued)
    summary = launcher.summary()
    assert summary["finished"] == 1 and summary["failed"] == 0, summary
    assert summary["restarts"] == 0, summary
    said = [m for m in messages if "put back in Slurm's queue" in m]
    assert len(said) == 1, messages
    assert said[0].startswith(f"sim-0 (Slurm job {requeued}) was put back"), said
    assert f"after it started on node {slurm_cluster.node} " in said[0], said
    assert "sim-" not in queue()


def _requeue_flag(job_id: str) -> str:
    """``Requeue=0`` or ``Requeue=1``, as ``scontrol show job`` gives the job's."""
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True)
    (flag,) = [word for word in out.stdout.split() if word.startswith("Requeue=")]
    return flag


@pytest.mark.timeout(120)
def test_the_sites_requeue_policy_decides_unless_extra_args_do(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The backend passes neither ``--requeue`` nor ``--no-requeue``: the cluster's
    ``JobRequeue`` (1, Slurm's default, on the test cluster) makes its jobs requeueable,
    which the launcher follows as one attempt (above); a user's ``--no-requeue`` in
    `extra_args` makes Slurm end them ``NODE_FAIL`` instead (the launcher's restarts,
    test_slurm_node_down_once.py) and refuse a ``scontrol requeue``."""
    jobs = {}
    for name, extra in (("default", ()), ("norequeue", ("--no-requeue",))):
        backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path / name, extra_args=extra)
        try:
            handle = backend.launch(Job(name, ["sleep", "60"], cwd=tmp_path))
            assert isinstance(handle, SlurmHandle)
            script = (tmp_path / name / f"{name}.sbatch").read_text()
            assert ("--no-requeue" in script) == bool(extra), script
            assert "--requeue" not in script.replace("--no-requeue", ""), script
            jobs[name] = _requeue_flag(handle.job_id)
            if extra:
                refused = subprocess.run(
                    ["scontrol", "requeue", handle.job_id], capture_output=True, text=True
                )
                assert refused.returncode != 0, refused
        finally:
            backend.close()
    assert jobs == {"default": "Requeue=1", "norequeue": "Requeue=0"}, jobs
