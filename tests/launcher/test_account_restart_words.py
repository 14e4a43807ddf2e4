"""A restart's words count its own attempt's messages, not its earlier attempts'.

The heartbeat is a simulation's count of messages over all its attempts; each attempt's
job keeps the count at its launch as its baseline (`SilenceWatch.beat_of`). Before,
with ``simulation_timeout=None`` that baseline was 0: a restart that had sent nothing
was listed in a failed study's error as "running: simulation 0 (attempt 1, ...,
messages received, ...)" on its first attempt's 3 messages (and its start-up timed as
over at its launch).

Here attempt 0 has 3 messages when it exits 1; attempt 1 has none until the test gives
it one. With a numeric timeout the baseline was already right: both are checked.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.local import LocalBackend

#: attempt N waits for its gate (a FIFO: attempt 1's never opens), then exits 1
SOLVER = (
    "import os, sys; attempt = os.environ['MELISSA_TRAINER_ATTEMPT']; "
    "open(os.path.join(%r, 'gate-' + attempt)).read(); sys.exit(1)"
)  # (no braces: the command is a template, `templates`)


def running_line(launch: Launcher) -> str:
    (line,) = [line for line in launch.failures().splitlines() if "running:" in line]
    return line


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout", [None, 600.0])
def test_a_restart_that_sent_nothing_says_no_message_yet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, timeout: float | None
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    os.mkfifo(tmp_path / "gate-0")
    beats: dict[int, int] = {}
    tuning = LauncherTuning(
        poll_interval=0.02, kill_grace=2.0, simulation_timeout=timeout, max_restarts=1,
        systematic_failures=None,
    )  # fmt: skip
    launch = Launcher(
        [sys.executable, "-c", SOLVER % str(tmp_path)], UniformSampler({"x": (0.0, 1.0)}, seed=0),
        1, backend=LocalBackend(), tuning=tuning, log_dir=tmp_path / "logs",
    )  # fmt: skip
    launch.start(tmp_path / "rendezvous", heartbeat=lambda: dict(beats))

    def started(attempt: int) -> bool:
        text = f"simulation 0 started (attempt {attempt})"
        return any(text in r.getMessage() for r in caplog.records)

    try:
        wait_until(lambda: started(0), "attempt 0 to start", 30.0)
        beats[0] = 3  # attempt 0's messages
        assert ", messages received, " in running_line(launch)
        os.close(os.open(tmp_path / "gate-0", os.O_WRONLY))  # attempt 0 exits 1
        wait_until(lambda: started(1), "attempt 1 to start", 30.0)
        line = running_line(launch)
        assert "(attempt 1, parameters " in line, line
        assert ", no message received yet, " in line, line
        beats[0] = 4  # attempt 1's first message
        assert ", messages received, " in running_line(launch)
    finally:
        launch.stop()
