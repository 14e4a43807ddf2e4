"""A `Launcher` used on its own (no abandon callback) says once that no one tells the
receivers of a simulation given up, then the count when it stops: before, one warning
per failure.

Oracle: the study's records (which simulations were abandoned) against the log lines."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest

from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.samplers import ListSampler

pytestmark = [pytest.mark.timeout(120), pytest.mark.e2e]

#: fails (exit 1) wherever p0 > 0.5
SOLVER = [
    sys.executable,
    "-c",
    "import json, os, sys; p = json.loads(os.environ['MELISSA_TRAINER_PARAMETERS']); "
    "sys.exit(1 if p['p0'] > 0.5 else 0)",
]
P0 = [0.1, 0.9, 0.8, 0.2, 0.7, 0.3]  # the first succeeds: not a systematic failure


def test_given_up_without_a_callback_is_said_once_then_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    sampler = ListSampler([{"p0": p} for p in P0])
    launcher = Launcher(SOLVER, sampler, len(P0), job_limit=1, log_dir=tmp_path / "logs",
                        tuning=LauncherTuning(max_restarts=0, poll_interval=0.01,
                                              on_failure="abandon"))  # fmt: skip
    launcher.start(tmp_path / "rendezvous", study_dir=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while not launcher.done:  # (the condition polled, as the launcher tests do)
            launcher.check()
            assert time.monotonic() < deadline, "the study did not complete"
            time.sleep(0.02)
    finally:
        launcher.stop()
    abandoned = sorted(o.simulation_id for o in launcher.outcomes() if o.status == "abandoned")
    assert len(abandoned) == 3
    lines = [r.getMessage() for r in caplog.records if "no abandon callback" in r.getMessage()]
    assert len(lines) == 2, lines  # before: one per simulation given up (3)
    assert lines[0].startswith(f"simulation {abandoned[0]} given up")
    ids = ", ".join(map(str, abandoned))
    assert lines[1] == (
        f"3 simulations given up in all with no abandon callback to tell the receivers ({ids})"
    )
