"""Studies on a real single-node Slurm cluster (tests/slurm_cluster.py), started once
for this module: a `Launcher`'s study of batch jobs streaming to a receiver, and the
jobs of a SIGKILLed trainer, which cancel themselves when its lease expires or are
cancelled by the restarted study. Batch jobs and steps alone: test_slurm.py."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, PYTHON, pgrep, queue
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.backends.base import study_id
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.tuning import LauncherTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

#: pytest-xdist: this module's tests on one worker, which starts the module's one cluster
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]


SIMULATION = """
import json, os
import numpy as np
from melissa_trainer.client import Client

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
with Client({"u": ((8,), "float64")}, send_timeout=30) as client:
    for step in range(4):
        client.send(step, u=np.full(8, a + step))
"""


@pytest.mark.timeout(150)
def test_launcher_runs_a_study_on_slurm(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    """3 simulations, at most 2 at once, each a batch job streaming 4 steps to a real
    receiver through the rendezvous directory: every (simulation, step) arrives once."""
    (tmp_path / "sim.py").write_text(SIMULATION)
    parameters = [{"a": 0.0}, {"a": 10.0}, {"a": 20.0}]
    buffer = FIFOBuffer(100)
    receiver = Receiver(
        buffer, config=ReceiverConfig(expected_simulations=3, rendezvous_dir=tmp_path / "rdv")
    )
    launcher = Launcher(
        [PYTHON, str(tmp_path / "sim.py")],
        parameters,
        3,
        job_limit=2,
        backend=SlurmBackend(poll_every=POLL, time_limit=5),
        log_dir=tmp_path / "logs",
        tuning=LauncherTuning(max_restarts=0, on_failure="raise"),
    )
    receiver.start()
    samples = []
    try:
        launcher.start(tmp_path / "rdv", heartbeat=receiver.activity, study_dir=tmp_path)
        deadline = time.monotonic() + 100
        ended = False  # the stream: the receiver closes the buffer after 3 simulations
        peak = 0  # most simulation jobs seen in the queue at once
        while not (ended and launcher.done):
            launcher.check()
            receiver.check()
            peak = max(peak, sum("-sim-" in line for line in queue().splitlines()))
            assert time.monotonic() < deadline, (launcher.summary(), len(samples))
            try:
                batch = buffer.get_batch(16, timeout=0.2)
            except TimeoutError:
                continue
            samples += batch
            if not batch:
                ended = True
                time.sleep(0.1)
    finally:
        launcher.stop()
        receiver.stop()
    launcher.check()
    keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == [(sim, step) for sim in range(3) for step in range(4)]
    for sample in samples:
        a = parameters[int(sample["simulation_id"])]["a"]
        np.testing.assert_array_equal(sample["u"], np.full(8, a + int(sample["time_step"])))
    assert 1 <= peak <= 2  # job_limit, as Slurm sees it
    summary = launcher.summary()
    assert summary["finished"] == 3 and summary["failed"] == 0 and summary["restarts"] == 0
    assert "sim-" not in queue()


LEASE_DRIVER = """
import sys, time
from melissa_trainer.launcher.backends import Job, SlurmBackend

root, marker = sys.argv[1], sys.argv[2]
backend = SlurmBackend(poll_every=0.2, lease_timeout=5, script_dir=root)
backend.begin_study("leasestudy")
handle = backend.launch(
    Job("sleeper", [sys.executable, "-c", "import time; time.sleep(300)", marker], cwd=root,
        log_path=f"{root}/sleeper.log")
)
while backend.poll(handle) is None and handle.state != "RUNNING":
    time.sleep(0.1)
print(handle.job_id, flush=True)
time.sleep(300)  # killed by the test
"""


@pytest.mark.timeout(120)
def test_jobs_of_a_sigkilled_trainer_cancel_themselves_when_the_lease_expires(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    marker = f"melissa-slurm-lease-{os.getpid()}"
    (tmp_path / "driver.py").write_text(LEASE_DRIVER)
    with subprocess.Popen(  # (its exit closes the pipe)
        [PYTHON, str(tmp_path / "driver.py"), str(tmp_path), marker],
        stdout=subprocess.PIPE,
        text=True,
    ) as driver:
        try:
            assert driver.stdout is not None
            job_id = driver.stdout.readline().strip()
            assert job_id, "the driver printed no job id"
            wait_until(lambda: bool(pgrep(marker)), "the job's command to run", 30, interval=0.1)
        finally:
            driver.kill()  # the trainer dies without cancelling anything
            driver.wait(30)
    assert f"{job_id} mt-leasestudy-sleeper" in queue()
    wait_until(lambda: job_id not in queue().split(), "the orphaned job to end", interval=0.1)
    assert not pgrep(marker)
    assert "has not renewed the lease" in (tmp_path / "sleeper.log").read_text()


RESTART_SIMULATION = """
import json, os, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

release = Path(os.environ["MELISSA_TEST_RELEASE"])
while not release.exists():  # the first run's jobs wait here until cancelled
    time.sleep(0.1)
a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
with Client({"u": ((8,), "float64")}, send_timeout=30) as client:
    for step in range(4):
        client.send(step, u=np.full(8, a + step))
"""

RESTART_DRIVER = """
import json, logging, sys
from pathlib import Path
import numpy as np
import torch
from melissa_trainer import OnlineTrainer, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends import SlurmBackend

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
root = Path(sys.argv[1])
seen = []

def process_sample(sample):
    seen.append([int(sample["simulation_id"]), int(sample["time_step"])])
    u = torch.from_numpy(sample["u"].astype(np.float32))
    return u[:1], u[1:2]

launcher = Launcher(
    [sys.executable, str(root / "sim.py")],
    [{"a": 0.0}, {"a": 10.0}, {"a": 20.0}],
    3,
    job_limit=2,
    backend=SlurmBackend(poll_every=0.2, time_limit=5),  # lease: 300 s, longer than the test
    env={"MELISSA_TEST_RELEASE": str(root / "release")},
    tuning=LauncherTuning(max_restarts=0, on_failure="raise"),
)
torch.manual_seed(0)
model = torch.nn.Linear(1, 1)
trainer = OnlineTrainer(
    model,
    TrainingArguments(
        output_dir=str(root / "out"),
        batch_size=1,
        buffer="fifo",  # each sample once: the test checks every step trained on once
        buffer_size=64,
        disable_progress_bar=True,
        report_to="none",
        stop_sync_steps=2,
    ),
    torch.optim.SGD(model.parameters(), lr=1e-3),
    train_source=Study(launcher),
    process_sample=process_sample,
)
trainer.train()
print(json.dumps(sorted(seen)), flush=True)
"""


def study_jobs(prefix: str) -> dict[str, str]:
    """Job id -> name of the queued or running jobs whose name starts with `prefix`."""
    result = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True)
    jobs = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.strip())
    return {job_id: name for job_id, name in jobs.items() if name.startswith(prefix)}


@pytest.mark.timeout(240)
def test_a_restarted_study_cancels_the_jobs_of_its_sigkilled_run(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An OnlineTrainer SIGKILLed while its simulations run as batch jobs leaves them
    running; restarted on the same output directory, it cancels them before it launches
    anything, and the study completes with every (simulation, step) trained on once."""
    (tmp_path / "sim.py").write_text(RESTART_SIMULATION)
    (tmp_path / "driver.py").write_text(RESTART_DRIVER)
    prefix = f"mt-{study_id(tmp_path / 'out' / 'study')}-sim-"
    argv = [PYTHON, str(tmp_path / "driver.py"), str(tmp_path)]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(
            lambda: len(study_jobs(prefix)) == 2, "two jobs of the first run", 120, interval=0.1
        )
    finally:
        first.kill()
        first.wait(30)
    orphans = study_jobs(prefix)
    assert sorted(orphans.values()) == [f"{prefix}0", f"{prefix}1"]  # they outlive it
    second = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert second.stderr is not None
        log = []
        while not any("launcher started" in line for line in log[-1:]):
            log.append(second.stderr.readline())
            assert log[-1], "the restarted trainer ended before its launcher started"
        left = set(orphans) & set(study_jobs(prefix))
        assert not left, f"jobs of the killed run still queued after the restart: {left}"
        (tmp_path / "release").touch()
        out, err = second.communicate(timeout=150)
    finally:
        second.kill()
        second.wait(30)
    err = "".join(log) + err
    assert second.returncode == 0, err[-3000:]
    assert "left by an earlier run" in err
    keys = json.loads(out.strip().splitlines()[-1])
    assert keys == [[sim, step] for sim in range(3) for step in range(4)]
    assert not study_jobs(prefix)
    # the exit files of the jobs cancelled at the restart are consumed, as any other job's
    left_behind = sorted(p.name for p in (tmp_path / "out").rglob("*.exit"))
    assert not left_behind, left_behind
