"""A running batch job that Slurm requeues mid-study (``scontrol requeue``: what an
administrator does, or Slurm itself after a node failure with ``JobRequeue=1``, its
default), on the one-node test cluster (tests/slurm_cluster.py): the job keeps its id,
goes back to the queue and runs its script again. The backend must follow it as one
job: its end is the second run's, not the first run's SIGTERM, and it counts as
queued, not started, while it waits; the requeue is said once in a WARNING
(`queued_end.queue_words`; failed before: nothing said it), with when Slurm expects to
start it again (its BeginTime: squeue's StartTime)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from launcher_said import one_line
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: the first run waits to be requeued; the second exits 7
RUNS = """
import sys, time
with open("runs.txt", "a+") as f:
    f.seek(0)
    n = len(f.read().splitlines())
    f.write(f"run {n}\\n")
if n == 0:
    time.sleep(600)
sys.exit(7)
"""


@pytest.mark.timeout(240)
def test_a_requeued_job_is_followed_to_its_second_runs_end(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="melissa_trainer.launcher.backends.slurm")
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path / "scripts")
    backend.begin_study("requeued")
    runs = tmp_path / "runs.txt"
    states: list[str | None] = ["RUNNING"]  # (waited for below)
    try:
        handle = backend.launch(Job("sim-0", [sys.executable, "-c", RUNS], cwd=tmp_path))
        assert isinstance(handle, SlurmHandle)
        wait_until(
            lambda: backend.poll(handle) is None and backend.started(handle) and runs.exists(),
            what="the first run",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        slurm_cluster.run("scontrol", "requeue", handle.job_id)

        def ended() -> bool:
            code = backend.poll(handle)
            if not states or states[-1] != handle.state:
                states.append(handle.state)
            return code is not None

        wait_until(
            ended,
            what=lambda: f"the job's end; states seen: {states}",
            timeout=UNTIL_TEST_TIMEOUT,
            interval=0.05,
        )
        assert runs.read_text().splitlines() == ["run 0", "run 1"], (states, runs.read_text())
        assert backend.poll(handle) == 7, states
        # back in the queue between its runs (cred_expire: 5 s on the test cluster)
        assert "PENDING" in states[states.index("RUNNING") :], states
    finally:
        backend.close()
    # said once, in words (before, nothing told a requeue from a slow start)
    said = [
        one_line(r.getMessage())
        for r in caplog.records
        if "put back in Slurm's queue" in one_line(r.getMessage())
    ]
    assert len(said) == 1, [one_line(r.getMessage()) for r in caplog.records]
    assert said[0].startswith(f"sim-0 (Slurm job {handle.job_id}) was put back"), said
    # and when it starts again (failed before: it waited for its BeginTime unsaid)
    assert "; squeue: PENDING, BeginTime)" in said[0], said
    assert "; Slurm expects to start it at 20" in said[0], said
    assert "(squeue's StartTime, in about " in said[0] and "cred_expire" in said[0], said
