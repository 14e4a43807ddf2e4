"""The launcher's excuse for the stream's silence expires when its thread has not
completed a poll for `EXCUSE_LIFETIME` s beyond `poll_interval` (`Launcher.silence_explained`).

Before, a launcher thread hung alive (a Slurm ``squeue`` that never returns) kept its
last excuse ("1 simulation before its first message, within its start-up allowance")
for ever: the stall watchdog (`study.starvation`) then waited on a silence that nothing
would end. Here the thread is held in the heartbeat (called at each tick), the clock
that `launcher_record` reads is moved past the bound, then the thread is let go.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest
from launcher_said import one_line
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler, launcher_record
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.launcher_record import EXCUSE_LIFETIME


class HeldHeartbeat:
    """A heartbeat that, once `hold` is set, holds the launcher's thread until `release`."""

    def __init__(self) -> None:
        self.hold, self.entered, self.release = (threading.Event() for _ in range(3))

    def __call__(self) -> Mapping[int, int]:
        if self.hold.is_set():
            self.entered.set()
            self.release.wait(60)
        return {}


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_hung_launcher_thread_excuses_nothing_past_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    gate = tmp_path / "gate"
    os.mkfifo(gate)  # (never opened for writing: the solver waits until the stop kills it)
    heartbeat = HeldHeartbeat()
    tuning = LauncherTuning(poll_interval=0.02, kill_grace=2.0, simulation_timeout=600.0)
    launch = Launcher(
        [sys.executable, "-c", f"open({str(gate)!r}).read()"],
        UniformSampler({"x": (0.0, 1.0)}, seed=0), 1, backend=LocalBackend(), tuning=tuning,
        log_dir=tmp_path / "logs",
    )  # fmt: skip
    launch.start(tmp_path / "rendezvous", heartbeat=heartbeat)
    try:
        wait_until(lambda: launch.silence_explained() is not None, "the excuse", 30.0)
        excuse = launch.silence_explained()
        assert excuse is not None and "within its start-up allowance" in excuse, excuse
        heartbeat.hold.set()
        assert heartbeat.entered.wait(30), "the launcher's thread did not tick"
        # hung, within the bound: the last poll's excuse holds
        assert launch.silence_explained() == excuse
        late = time.monotonic() + EXCUSE_LIFETIME + tuning.poll_interval + 1.0
        monkeypatch.setattr(launcher_record, "time", SimpleNamespace(monotonic=lambda: late))
        assert launch.silence_explained() is None
        assert launch.silence_explained() is None
        (warning,) = [
            one_line(r.getMessage()) for r in caplog.records if "excuse" in one_line(r.getMessage())
        ]
        assert "has not completed a poll for" in warning, warning
        assert "EXCUSE_LIFETIME" in warning, warning
        monkeypatch.undo()
        heartbeat.hold.clear()
        heartbeat.release.set()
        # its next poll completes: the excuse is back
        wait_until(lambda: launch.silence_explained() is not None, "the excuse again", 30.0)
    finally:
        heartbeat.release.set()
        launch.stop()
