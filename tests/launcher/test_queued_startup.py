"""A job that a scheduler holds in its queue has not started: its wait is not the
solver's start-up. Seen on a real Slurm cluster: two jobs held 20 s (``--begin=now+20``)
by a quick solver were reported "spent 29.9 s of its 41.4 s before its first
message: start-up ... dominates", with worker mode as the fix, and ``startup_seconds``
held the queue's time. Here a backend holds each job's process at a gate and says it
is not started until it opens the gate (as `SlurmBackend.started` says while squeue
lists the job PENDING)."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from own_solver import FAST, run_to_end, solver, startup_advice

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]

QUEUED = 4.0  # seconds at least in the "queue"


class HeldBackend(LocalBackend):
    """A scheduler's queue: each job's process waits for its gate file before running
    the solver, and `started` says False until the gate opens, as a job leaves the queue.

    The gate opens at a `started` call at least `QUEUED` s after the launch, and only
    once the launcher has polled the job twice (`Backend.poll`, which its tick makes for
    every job): all that a tick does between two polls then ran while the job was queued,
    its start-up timing included, in whatever order the tick asks and however late the
    launcher's thread runs on a loaded machine. Counted on the backend's own interface
    (`poll`, `started`), not on the names of the launcher's functions that call it (it
    asked which function called it before: a rename left the gate shut for good). Called
    from the launcher's thread only."""

    def __init__(self, gates: Path) -> None:
        super().__init__()
        self.gates = gates
        self.launched: dict[str, float] = {}
        self.opened: dict[str, float] = {}  # when the job left the queue
        #: `poll`s of each job so far (at the gate's opening: its polls while queued)
        self.polls: dict[str, int] = {}
        self.asked_while_queued = 0

    def launch(self, job: Any) -> Any:
        gate = self.gates / job.name
        wait = f'while [ ! -e "{gate}" ]; do sleep 0.05; done; exec "$@"'
        held = dataclasses.replace(job, argv=["sh", "-c", wait, "sh", *job.argv])
        self.launched[job.name] = time.monotonic()
        self.polls[job.name] = 0
        return super().launch(held)

    def poll(self, handle: Any) -> int | None:
        if handle.job.name not in self.opened:
            self.polls[handle.job.name] += 1
        return super().poll(handle)

    def started(self, handle: Any) -> bool:
        name = handle.job.name
        gate = self.gates / name
        if gate.exists():
            return True
        # (a whole tick between two polls saw it queued)
        if self.polls[name] >= 2 and time.monotonic() - self.launched[name] >= QUEUED:
            self.opened[name] = time.monotonic()
            gate.touch()
            return True
        self.asked_while_queued += 1
        return False


@pytest.mark.timeout(90)
def test_time_in_a_schedulers_queue_is_not_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    buffer = FIFOBuffer(100)
    config = ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path / "rendezvous")
    receiver = Receiver(buffer, config=config)
    receiver.start()
    backend = HeldBackend(tmp_path)
    launch = Launcher(
        solver(tmp_path),  # no start-up of its own; 3 steps at once
        make_sampler("uniform", {"x": (0, 1)}, seed=0),
        1,
        backend=backend,
        tuning=FAST,
    )
    launch.start(
        tmp_path / "rendezvous",
        heartbeat=receiver.activity,
        abandon=lambda sid: None,
        data=receiver,
        study_dir=tmp_path / "study",
    )
    assert run_to_end(launch, receiver, buffer) == 3
    summary = launch.summary()
    (name,) = backend.opened
    # (by construction: queued at least QUEUED s, through at least one whole tick)
    assert backend.opened[name] - backend.launched[name] >= QUEUED
    assert backend.polls[name] >= 2 and backend.asked_while_queued > 0
    # Its start-up is timed from a tick that found it queued, after its launch: less than
    # from its launch to its first message (`first`, as the receiver timed it), which it
    # was before, queue time included. An order of events on one clock, not a speed (not
    # `< queued`: the solver's own start-up, its imports, takes seconds on a loaded
    # machine, and may outlast the queue)
    (sid,) = receiver.completed()
    first = receiver.first_message_at(sid)
    assert first is not None
    assert 0 < summary["startup_seconds"] < first - backend.launched[name], summary
    assert summary["startup_seconds"] < summary["simulation_seconds"], summary  # (ditto)
    assert startup_advice(caplog) == []  # nor is worker mode advised for it
