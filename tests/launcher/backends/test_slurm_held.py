"""A batch job held in Slurm's queue, on the one-node test cluster: submitted held
(``sbatch --hold``: ``JobHeldUser``), then held by root (``scontrol hold``:
``JobHeldAdmin``), then released. A held job never starts and the study waits for it
(a queued job's start-up allowance has not begun): before, nothing said so but the
queue notice's bare reason (``JobHeldUser``), and the study could wait forever
silently. Now each hold is said once in a WARNING naming the fix (``scontrol release
ID``), and `queue_reason` (the queue notice's words) names it too. Failed before: no
warning; queue_reason was the bare "JobHeldUser"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from launcher_said import one_line
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, finish
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

LOGGER = "melissa_trainer.launcher.backends.slurm"


def _held(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        one_line(r.getMessage())
        for r in caplog.records
        if r.levelno >= logging.WARNING and "is held in Slurm's queue" in one_line(r.getMessage())
    ]


@pytest.mark.timeout(180)
def test_a_held_job_is_said_with_its_release(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path, extra_args=["--hold"])
    backend.begin_study("held")
    try:
        handle = backend.launch(Job("sim-0", ["true"], cwd=tmp_path, log_path=tmp_path / "log"))
        assert isinstance(handle, SlurmHandle)
        wait_until(
            lambda: backend.poll(handle) is None and handle.reason == "JobHeldUser",
            what=lambda: f"the user's hold (state {handle.state}, reason {handle.reason})",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        said = _held(caplog)
        assert len(said) == 1, said
        assert said[0].startswith(
            f"sim-0 (Slurm job {handle.job_id}) is held in Slurm's queue (squeue: PENDING, "
            "JobHeldUser: held by its user"
        ), said
        assert f"scontrol release {handle.job_id})" in said[0], said
        reason = backend.queue_reason(handle)
        assert reason is not None and "scontrol release JOBID" in reason, reason
        assert not backend.started(handle)
        for _ in range(3):  # (said once per hold, not at each poll)
            backend.poll(handle)
        slurm_cluster.run("scontrol", "hold", handle.job_id)  # root's: an admin hold
        wait_until(
            lambda: backend.poll(handle) is None and handle.reason == "JobHeldAdmin",
            what=lambda: f"the admin's hold (state {handle.state}, reason {handle.reason})",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        said = _held(caplog)
        assert len(said) == 2, said
        assert "JobHeldAdmin: held by an administrator" in said[1], said
        slurm_cluster.run("scontrol", "release", handle.job_id)
        assert finish(backend, handle, timeout=UNTIL_TEST_TIMEOUT) == 0
    finally:
        backend.close()
    assert len(_held(caplog)) == 2


@pytest.mark.timeout(180)
def test_a_suspended_job_is_said_with_its_resume(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``scontrol suspend`` (or a preemption with PreemptMode=SUSPEND) stops a running
    job's processes until ``scontrol resume``: said once. Failed before: nothing said."""
    caplog.set_level("WARNING", logger=LOGGER)
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path)
    backend.begin_study("suspended")
    try:
        handle = backend.launch(Job("sim-0", ["sleep", "600"], cwd=tmp_path))
        assert isinstance(handle, SlurmHandle)
        wait_until(
            lambda: backend.poll(handle) is None and handle.state == "RUNNING",
            what="the job to run",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        slurm_cluster.run("scontrol", "suspend", handle.job_id)
        wait_until(
            lambda: backend.poll(handle) is None and handle.state == "SUSPENDED",
            what=lambda: f"the suspension (state {handle.state})",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        for _ in range(3):  # (said once, not at each poll)
            backend.poll(handle)
        slurm_cluster.run("scontrol", "resume", handle.job_id)
        wait_until(
            lambda: backend.poll(handle) is None and handle.state == "RUNNING",
            what="the job to run again",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        assert backend.kill(handle, grace=5) is None
    finally:
        backend.close()
    said = [
        one_line(r.getMessage()) for r in caplog.records if "suspended" in one_line(r.getMessage())
    ]
    assert said == [
        f"sim-0 (Slurm job {handle.job_id}) is suspended (squeue: SUSPENDED): it does not "
        f"run until someone runs scontrol resume {handle.job_id}, and the study waits for "
        f"it meanwhile; scancel {handle.job_id} to give it up"
    ], said
