"""A study's stop kills the jobs in flight with one log line that summarises them (how
many, the first 8 job names then "...", the grace), not a line per job: with hundreds of
simulations in flight that was hundreds of INFO lines ("killing sim-N (pid ...)").

The jobs are real sleeper processes on the local backend; the oracle for which jobs were
in flight is the pid files they write, and every one is dead after the stop.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning, ListSampler, LocalBackend

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SLEEPER = r"""
import os, sys, time
sid = os.environ["MELISSA_TRAINER_SIMULATION_ID"]
path = os.path.join(sys.argv[1], f"{sid}.pid")
with open(path + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.replace(path + ".tmp", path)  # (never seen empty by the test)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """A live process (a zombie, killed but not yet reaped, is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("n", [3, 10])
def test_a_stop_logs_one_line_for_the_jobs_it_kills(
    n: int, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(textwrap.dedent(SLEEPER))
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    launch = Launcher(
        [sys.executable, str(sleeper), str(pids_dir)],
        ListSampler([{"x": float(i)} for i in range(n)]),
        n,
        backend=LocalBackend(),
        job_limit=n,
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, simulation_timeout=None),
    )
    pids: list[int] = []
    try:
        launch.start(tmp_path / "rendezvous")
        wait_until(lambda: len(list(pids_dir.glob("*.pid"))) == n, "every sleeper running", 240)
        pids = [int(p.read_text()) for p in pids_dir.glob("*.pid")]
        with caplog.at_level(logging.INFO, logger="melissa_trainer.launcher"):
            launch.stop()
    finally:
        launch.stop()
        for pid in pids:  # (the test's own processes, should the stop have failed)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    killing = [r.getMessage() for r in caplog.records if "killing" in r.getMessage()]
    assert len(killing) == 1, killing  # (before: one line per job)
    said = killing[0]
    names = re.search(rf"killing {n} jobs? \(([^)]*)\)", said)
    assert names is not None, said
    listed = names.group(1).split(", ")
    shown = min(n, 8)  # (the first 8, then "...")
    assert listed[shown:] == (["..."] if n > 8 else []), said
    assert len(set(listed[:shown])) == shown, said
    assert set(listed[:shown]) <= {f"sim-{sid}" for sid in range(n)}, said
    assert "kill_grace=2.0 s" in said, said
    assert not any(alive(pid) for pid in pids)  # (the summary did not replace the kills)


@pytest.mark.timeout(300)
def test_a_job_killed_for_its_own_silence_still_gets_its_own_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Mid-study, a hung job's kill is named on its own line (which job, why): only the
    stop's kills are summarised."""
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(textwrap.dedent(SLEEPER))
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    launch = Launcher(
        [sys.executable, str(sleeper), str(pids_dir)],
        ListSampler([{"x": 0.0}]),
        1,
        backend=LocalBackend(),
        # (no heartbeat: its silence is the time since its launch)
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, simulation_timeout=1.0),
    )

    def killing() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "killing" in r.getMessage()]

    with caplog.at_level(logging.INFO, logger="melissa_trainer.launcher"):
        try:
            launch.start(tmp_path / "rendezvous")
            wait_until(lambda: bool(killing()), "the hung simulation killed", 240)
        finally:
            launch.stop()
    first = killing()[0]
    said = first.getMessage()
    assert first.levelno == logging.WARNING, said
    assert "simulation 0" in said and "silent for" in said, said
    assert "killing sim-0 (pid " in said, said
    for record in killing()[1:]:  # (its restarts' own lines, and the stop's summary)
        text = record.getMessage()
        assert "killing sim-0-r" in text or text.startswith("stopping: killing 1 job "), text
