"""A failed study's error lists the simulations running with what the receivers have
of them now, not as of the launcher's last tick.

Before, a user trial (htrial21) read "running: simulation 4 (attempt 0, ..., no message
received yet, silent 0 s)" though simulation 4 had sent 3 steps: the report read the
job's `sending`, which only the silence watch's tick sets, and simulation 3's failure
stopped the study within the tick, before that watch had seen 4's messages. The report
now reads the heartbeat itself (`FailurePolicy.running`).

Here the tick that launches simulation 0 is the only one (a poll interval of an hour):
its heartbeat moves after it, and the report, asked then, must say so."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.local import LocalBackend


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_running_report_reads_the_heartbeat_now(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    beats: dict[int, int] = {}
    tuning = LauncherTuning(poll_interval=3600.0, kill_grace=2.0, simulation_timeout=600.0)
    launch = Launcher(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        UniformSampler({"x": (0.0, 1.0)}, seed=0),
        1,
        backend=LocalBackend(),
        tuning=tuning,
        log_dir=tmp_path / "logs",
    )
    launch.start(tmp_path / "rendezvous", heartbeat=lambda: dict(beats))
    try:
        # (logged once its job holds its heartbeat baseline: 0, no message yet)
        wait_until(
            lambda: any("simulation 0 started" in r.getMessage() for r in caplog.records),
            "simulation 0 to start",
            30.0,
        )
        (before,) = [line for line in launch.failures().splitlines() if "running:" in line]
        assert "no message received yet" in before, before
        beats[0] = 3  # its first 3 messages, since the tick
        (after,) = [line for line in launch.failures().splitlines() if "running:" in line]
        assert after.startswith("  running: simulation 0 (attempt 0, parameters {'x': "), after
        assert ", messages received, silent " in after, after
    finally:
        launch.stop()
