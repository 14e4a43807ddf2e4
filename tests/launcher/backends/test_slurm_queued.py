"""A study whose Slurm jobs wait in the queue says so, on the real one-node cluster
(tests/slurm_cluster.py): the first-data notice counted them "running" while squeue
listed them PENDING (seen: "no data yet, ... 2 running, 0 restarted so far; training
waits for their first samples. A solver's start-up ... counts here", for two jobs held
with ``--begin``). It now says how many are queued and Slurm's reason, and no longer
calls them running."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from waiting import wait_until

from melissa_trainer import Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.backends.base import study_id

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: never runs: its jobs are held in the queue (--begin) until the study cancels them
SIMULATION = "raise SystemExit('a held job ran')\n"


def pending(prefix: str) -> dict[str, str]:
    """squeue's own word (the oracle): job name -> "STATE REASON" of this study's jobs."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%j %T %r"], capture_output=True, text=True, check=True
    ).stdout
    rows = (line.split(" ", 1) for line in out.splitlines() if line.strip())
    return {name: rest for name, rest in rows if name.startswith(prefix)}


@pytest.mark.timeout(180)
def test_the_first_data_notice_says_queued_jobs_are_queued_with_slurms_reason(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "sim.py").write_text(SIMULATION)
    launcher = Launcher(
        [sys.executable, str(tmp_path / "sim.py")],
        [{"a": 0.0}, {"a": 1.0}],
        2,
        job_limit=2,
        # held for 10 minutes: queued for the whole test, whatever the machine's load
        backend=SlurmBackend(poll_every=0.2, time_limit=5, extra_args=["--begin=now+600"]),
        tuning=LauncherTuning(poll_interval=0.05, max_restarts=0),
    )
    study = Study(launcher)
    study.first_data.after = 3600.0  # not before the test has seen the jobs queued
    caplog.set_level(logging.WARNING, logger="melissa_trainer.study")
    study.configure(str(tmp_path / "out"))
    study.start(FIFOBuffer(64), 0, 1)
    prefix = f"mt-{study_id(tmp_path / 'out' / 'study')}-sim-"
    try:
        study.on_all_ranks_started()
        wait_until(
            lambda: sorted(pending(prefix).values()) == ["PENDING BeginTime"] * 2,
            "squeue to list both jobs pending for their begin time",
            interval=0.05,
        )
        # the launcher's last tick has seen squeue's answer too (polls, not a sleep)
        wait_until(
            lambda: launcher.queued() == (2, {"BeginTime": 2}), "the launcher", interval=0.05
        )
        study.first_data.after = 0.0

        def noticed() -> bool:  # waits for data as the trainer's reader does
            study.wait_for(1, 0.05)
            return "no data yet" in caplog.text

        wait_until(noticed, "the first-data notice", interval=0.05)
        still = pending(prefix)
    finally:
        study.stop()
    assert sorted(still.values()) == ["PENDING BeginTime"] * 2  # queued when it was said
    (notice,) = [r.getMessage() for r in caplog.records if "no data yet" in r.getMessage()]
    assert "0 running, 2 simulations queued by the scheduler, not started yet" in notice, notice
    assert "(the scheduler's reason: BeginTime x2)" in notice, notice
    assert "2 running" not in notice, notice
    wait_until(lambda: not pending(prefix), "the study's jobs to be cancelled", interval=0.05)
