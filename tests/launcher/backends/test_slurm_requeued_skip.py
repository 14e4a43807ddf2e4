"""A study's simulation job that Slurm requeues after it sent HELD of its STEPS steps
(``scontrol requeue``, on the one-node test cluster: tests/slurm_cluster.py) reruns
sending only what the receiver does not hold.

A requeue runs the same batch script again: ``MELISSA_TRAINER_ATTEMPT`` is unchanged (0
here), but Slurm sets ``SLURM_RESTART_COUNT`` (1 at the first requeue; unset in the
first run: checked here, the solver writes it down). A launched client that sees it
above 0 asks its receivers which steps they hold (docs/protocol.md section 17), as a
launcher's rerun does, and the receiver answers from what it holds now. What a user
expects: the requeued run sends again its first step only (a rerun's first send goes
out at once, held or not: `client.rerun`), then the steps not held; each (simulation,
step) is trained on once. Failed before: the requeued run sent every step again, HELD
duplicates dropped by the receiver.

Oracles independent of the client: the receiver's duplicate count, the samples the
buffer gave (each step once), the file each run of the solver appends to. The
receiver's warning of the first run's close says a requeued job runs again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, PYTHON, queue

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.tuning import LauncherTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

STEPS = 8
HELD = 4
#: the solver: argv its directory. Its first run sends steps 0 .. HELD - 1, writes "sent"
#: and sleeps until the requeue ends it; its second run sends every step and exits 0.
#: Each run writes down its SLURM_RESTART_COUNT
SIMULATION = f"""
import os, sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

here = Path(sys.argv[1])
with open(here / "runs.txt", "a+") as f:
    f.seek(0)
    run = len(f.read().splitlines())
    f.write(f"run {{run}} restart={{os.environ.get('SLURM_RESTART_COUNT')}}\\n")
with Client({{"u": ((8,), "float64")}}, send_timeout=30) as client:
    for step in range({STEPS}):
        if run == 0 and step == {HELD}:
            (here / "sent").touch()
            time.sleep(600)
        client.send(step, u=np.full(8, float(step)))
"""


def _job_id() -> str:
    """The id of the study's one simulation job, as squeue lists it."""
    (line,) = [line for line in queue().splitlines() if "-sim-0" in line]
    return line.split()[0]


@pytest.mark.timeout(240)
def test_a_requeued_simulation_sends_only_what_its_receiver_lacks(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="melissa_trainer.stream.receiver")
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
        # the first run sleeps until the requeue: 60 s of silence allowed (a start-up too,
        # on a loaded machine); its sign-of-life interval, a quarter, outlasts the rerun
        tuning=LauncherTuning(
            simulation_timeout=60, startup_timeout=60, max_restarts=0, on_failure="raise"
        ),
    )
    receiver.start()
    samples: list[dict] = []  # type: ignore[type-arg]
    requeued = False
    try:
        launcher.start(tmp_path / "rdv", heartbeat=receiver.activity, study_dir=tmp_path)
        deadline = time.monotonic() + 200
        ended = False  # the stream: the receiver closes the buffer after the simulation
        while not (ended and launcher.done):
            launcher.check()
            receiver.check()
            assert time.monotonic() < deadline, (launcher.summary(), len(samples))
            # requeued once the receiver holds the first run's HELD steps (put in the buffer)
            held = receiver.telemetry()["samples_put"] >= HELD
            if not requeued and held and (tmp_path / "sent").exists():
                slurm_cluster.run("scontrol", "requeue", _job_id())
                requeued = True
            try:
                batch = buffer.get_batch(16, timeout=0.2)
            except TimeoutError:
                continue
            samples += batch
            ended = ended or not batch
        figures = receiver.telemetry()
    finally:
        launcher.stop()
        receiver.stop()
    launcher.check()
    runs = (tmp_path / "runs.txt").read_text().splitlines()
    assert runs == ["run 0 restart=None", "run 1 restart=1"], runs  # (Slurm's variable)
    keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == [(0, step) for step in range(STEPS)]  # each once
    # the oracle: of the HELD steps held, only the first came again (before: all HELD)
    assert figures["duplicates"] == 1, figures
    summary = launcher.summary()
    assert summary["finished"] == 1 and summary["failed"] == 0, summary
    assert summary["restarts"] == 0, summary
    assert "sim-" not in queue()
    # the receiver's warning of the first run's close names the requeue's rerun, not
    # only a launcher's restart (none is counted here: before, its words said none other)
    (warned,) = [r.getMessage() for r in caplog.records if "before its BYE" in r.getMessage()]
    assert "Slurm runs a job it requeued again, no restart counted" in warned, warned
