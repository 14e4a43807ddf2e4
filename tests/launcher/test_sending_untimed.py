"""With ``simulation_timeout=None`` a job's `sending` and `silent` are still kept from
the heartbeat (`SilenceWatch.check_timeouts`): only the kills are off.

Before, the silence watch returned before its loop when no timeout was set, so a job
that had sent stayed `sending=False`, `silent=0.0` forever: what reads them (the
stream's excuse, `expected_silence`; a failed study's list of those running, "silent
0 s" for a job silent for minutes) read a job that never sent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.jobs import RunningJob


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_job_that_sent_is_sending_without_a_timeout(tmp_path: Path) -> None:
    beats: dict[int, int] = {}
    tuning = LauncherTuning(poll_interval=0.05, kill_grace=2.0, simulation_timeout=None)
    launch = Launcher(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        UniformSampler({"x": (0.0, 1.0)}, seed=0),
        1,
        backend=LocalBackend(),
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
        beats[0] = 3  # its first 3 messages
        wait_until(lambda: running.sending, "the watch to hear simulation 0", 30.0)
        # then silent: its silence counts, tick by tick (no kill: no bound)
        wait_until(lambda: running.silent > 0.0, "simulation 0's silence to count", 30.0)
        (line,) = [x for x in launch.failures().splitlines() if "running:" in x]
        assert ", messages received, silent " in line, line
        assert launch.summary()["running"] == 1  # not killed
    finally:
        launch.stop()
