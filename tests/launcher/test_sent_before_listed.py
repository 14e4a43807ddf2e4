"""A job whose first message comes before its backend lists it started is running, not
requeued: squeue answers every `poll_every` (2 s by default), a quick solver's first
message often comes first. Only a job the backend had listed started, then not, is back
in its queue (`SilenceWatch.requeued`; that case: test_requeued_not_silent.py).

Before, any job that had sent while `started` said False was taken as requeued at each
tick: reset to `sending=False`, `silent=0`, its start-up never timed (`note_startups`
took it as queued, `since` moved to every tick) and a failed study's "running" line
said "no message received yet", nothing logged. Here a backend never lists its job
started (squeue not caught up), as `SlurmBackend.started` says before squeue lists it."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.jobs import RunningJob


class NotListedBackend(LocalBackend):
    """`started` says False for good (a squeue that has not listed the job running yet);
    counts the launcher's `poll`s (one per job each tick) under a lock."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._polls = 0

    def poll(self, handle: Any) -> int | None:
        with self._lock:
            self._polls += 1
        return super().poll(handle)

    def polls(self) -> int:
        with self._lock:
            return self._polls

    def started(self, handle: Any) -> bool:
        del handle
        return False


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_job_that_sent_before_its_backend_lists_it_runs_on(tmp_path: Path) -> None:
    beats: dict[int, int] = {}
    backend = NotListedBackend()
    tuning = LauncherTuning(poll_interval=0.05, kill_grace=2.0, simulation_timeout=None)
    launch = Launcher(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        UniformSampler({"x": (0.0, 1.0)}, seed=0),
        1,
        backend=backend,
        tuning=tuning,
        log_dir=tmp_path / "logs",
    )
    launch.start(tmp_path / "rendezvous", heartbeat=lambda: dict(beats))
    try:
        supervisor = launch._supervisor
        assert supervisor is not None

        def job() -> RunningJob | None:
            jobs = [j for j in list(supervisor.jobs.values()) if j.simulation_id == 0]
            return jobs[0] if jobs else None

        wait_until(lambda: job() is not None, "simulation 0 to start", 30.0)
        running = job()
        assert running is not None and not running.sending
        beats[0] = 3  # its first 3 messages, the backend still not listing it started
        wait_until(lambda: running.sending, "the watch to hear simulation 0", 30.0)
        heard_at = backend.polls()
        # 3 more ticks (a poll of the job each): no requeue came, none is to be seen
        wait_until(lambda: backend.polls() >= heard_at + 3, "3 more ticks", 30.0)
        assert running.sending  # (failed before: reset as if requeued)
        assert running.startup is not None  # its start-up timed (failed before: None)
        assert not running.ran and not running.back_in_queue
        wait_until(lambda: running.silent > 0.0, "simulation 0's silence to count", 30.0)
        (line,) = [x for x in launch.failures().splitlines() if "running:" in x]
        assert ", messages received, silent " in line, line
    finally:
        launch.stop()
