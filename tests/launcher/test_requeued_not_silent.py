"""A job that its scheduler puts back in the queue after it has sent (a Slurm requeue:
`SlurmBackend.started` is False again while squeue lists it PENDING) waits there; that
wait is not its silence. Before, the launcher counted it as silence since the job's
last message, killed the job as hung after `simulation_timeout` and restarted it, while
Slurm would have run it again on its own (the real case, on the test cluster:
tests/launcher/backends/test_slurm_requeued_study.py). Here, without Slurm, a backend
stands in: the solver sends 2 steps, writes "sent" and waits at a gate; the backend
says the job is not started from then on, and opens the gate (the job "runs again")
once it has said so for `QUEUED` s, longer than the 1 s `simulation_timeout`, and the
launcher has polled the job twice meanwhile. Failed before: killed as silent, one
restart counted."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from own_solver import FAST, run_to_end

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]

QUEUED = 3.0  # seconds at least "back in the queue": 3 times simulation_timeout
STEPS = 5

#: argv: the directory of "sent" and "gate"
SOLVER = f"""
import sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

here = Path(sys.argv[1])
with Client({{"u": ((4,), "float32")}}) as client:
    for step in range({STEPS}):
        client.send(step, u=np.full(4, step, np.float32))
        if step == 1:
            (here / "sent").touch()
            while not (here / "gate").exists():
                time.sleep(0.05)
"""


class RequeuingBackend(LocalBackend):
    """Says the job not started once it wrote "sent" (back in its scheduler's queue),
    until it opens the gate: at a `started` call at least `QUEUED` s after the first
    that found it so, the launcher having polled the job twice since (a whole tick saw
    it queued). Called from the launcher's thread only."""

    def __init__(self, here: Path) -> None:
        super().__init__()
        self.here = here
        self.queued_at: float | None = None
        self.polls_queued = 0

    def poll(self, handle: Any) -> int | None:
        if self.queued_at is not None:
            self.polls_queued += 1
        return super().poll(handle)

    def started(self, handle: Any) -> bool:
        gate = self.here / "gate"
        if gate.exists() or not (self.here / "sent").exists():
            return True
        now = time.monotonic()
        if self.queued_at is None:
            self.queued_at = now
        elif self.polls_queued >= 2 and now - self.queued_at >= QUEUED:
            gate.touch()
            return True
        return False


@pytest.mark.timeout(90)
def test_a_job_back_in_its_queue_after_it_sent_is_not_killed_as_silent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    (tmp_path / "solver.py").write_text(SOLVER)
    buffer = FIFOBuffer(100)
    config = ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path / "rendezvous")
    receiver = Receiver(buffer, config=config)
    receiver.start()
    backend = RequeuingBackend(tmp_path)
    tuning = LauncherTuning(
        poll_interval=FAST.poll_interval,
        kill_grace=FAST.kill_grace,
        simulation_timeout=1,
        startup_timeout=30,  # (a start-up on a loaded machine)
        max_restarts=1,
    )
    launch = Launcher(
        [sys.executable, str(tmp_path / "solver.py"), str(tmp_path)],
        make_sampler("uniform", {"x": (0, 1)}, seed=0),
        1,
        backend=backend,
        tuning=tuning,
    )
    launch.start(
        tmp_path / "rendezvous",
        heartbeat=receiver.activity,
        data=receiver,
        study_dir=tmp_path / "study",
    )
    assert run_to_end(launch, receiver, buffer) == STEPS
    assert (tmp_path / "gate").exists() and backend.queued_at is not None  # (it was queued)
    killed = [r.getMessage() for r in caplog.records if "silent for" in r.getMessage()]
    assert not killed, killed  # (failed before: killed while queued)
    summary = launch.summary()
    assert summary["finished"] == 1 and summary["restarts"] == 0, summary
