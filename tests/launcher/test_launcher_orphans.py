"""No orphan process: `stop()` kills every job and its children (SIGTERM ignored too),
and a trainer killed by SIGKILL, SIGTERM or SIGINT leaves no simulation running.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from launcher_runs import alive, command, kill_all, launcher, runs, script, statuses
from waiting import wait_until

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_stop_kills_every_job_and_its_children_even_if_they_ignore_sigterm(
    tmp_path: Path,
) -> None:
    launch = launcher(command(tmp_path, "family"), 3, job_limit=2, tuning={"kill_grace": 0.3})
    launch.start(tmp_path / "rendezvous")
    pids: list[int] = []
    try:
        wait_until(lambda: len(list(tmp_path.glob("*.family"))) == 2, "two families", 60.0)
        for path in tmp_path.glob("*.family"):
            pids += map(int, path.read_text().split())
        assert all(alive(pid) for pid in pids)
        launch.stop()
        assert [pid for pid in pids if alive(pid)] == []
        summary = launch.summary()  # killed, so not running: pending (run on resume)
        assert (summary["running"], summary["pending"]) == (0, 3)
        assert sorted(statuses(launch).values()) == ["pending", "pending"]
        launch.stop()  # idempotent
    finally:
        launch.stop()
        kill_all(pids)


DRIVER = r"""
import signal, sys, time
# Ctrl-C's KeyboardInterrupt even where SIGINT came ignored (a background job of a shell
# without job control: Python then installs no handler, and the SIGINT case timed out)
signal.signal(signal.SIGINT, signal.default_int_handler)
from melissa_trainer.launcher import Launcher, LauncherTuning, ListSampler
sim, out = sys.argv[1], sys.argv[2]
launcher = Launcher(
    [sys.executable, sim, "hang", out, '{{"hang": [0, 1]}}'],
    ListSampler([{"x": 0.0}, {"x": 1.0}]), 2, job_limit=2,
    tuning=LauncherTuning(poll_interval=0.05),
)
launcher.start(out + "/rendezvous")
time.sleep(600)
"""


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_trainer_leaves_no_simulation_running(tmp_path: Path, sig: int) -> None:
    """SIGKILL and SIGTERM: no cleanup code runs in the trainer (PDEATHSIG ends the
    simulations); SIGINT (Ctrl-C): the interpreter exits and `atexit` runs `stop()`."""
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, script(tmp_path), str(tmp_path)], cwd=tmp_path
    )
    pids: list[int] = []
    try:
        wait_until(lambda: len(runs(tmp_path)) == 2, "two simulations", 60.0)
        pids = [pid for _, _, pid in runs(tmp_path)]
        assert all(alive(pid) for pid in pids)
        driver.send_signal(sig)
        assert driver.wait(60) != 0
        wait_until(lambda: not any(alive(pid) for pid in pids), "PDEATHSIG to end them", 60)
    finally:
        driver.kill()
        driver.wait()
        kill_all(pids)
