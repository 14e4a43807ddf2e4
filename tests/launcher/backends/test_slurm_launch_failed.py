"""A batch job the study kills while its node fails to launch it (slurmd SIGSTOPped on
the one-node test cluster, tests/slurm_cluster.py): the controller allocates the job
(squeue: RUNNING), its launch times out (MessageTimeout: COMPLETING), the study's
scancel comes meanwhile, and once the node answers again Slurm requeues the job and
holds it (PENDING, "launch failed requeued held"): the cancel is undone, and the job
would run only once someone released it. Seen in an abuse trial: the backend polled the
killed job as queued for ever (the study waiting on a job it had killed). Now the backend
cancels such a job again. Failed before: the job never ended (the test's wait ran out).

Left alone (not killed), the same failed launch was requeued and ran again (a requeue
the backend follows: test_slurm_requeued.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, queue
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]


@pytest.mark.timeout(300)
def test_a_job_killed_while_its_launch_fails_is_cancelled_again_when_requeued(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path, lease_timeout=None)
    backend.begin_study("launchfailed")
    try:
        with slurm_cluster.paused("slurmd"):
            handle = backend.launch(Job("sim-0", ["sleep", "600"], cwd=tmp_path))
            assert isinstance(handle, SlurmHandle)
            # its launch timed out: the controller waits for the node to end it
            wait_until(
                lambda: backend.poll(handle) is None and handle.state == "COMPLETING",
                what=lambda: f"the failed launch (state {handle.state}, {queue()})",
                timeout=UNTIL_TEST_TIMEOUT,
            )
            assert backend.kill(handle, grace=1) is None
        wait_until(
            lambda: backend.poll(handle) is not None,
            what=lambda: f"the job's end (state {handle.state}, {handle.reason}): {queue()}",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        assert backend.poll(handle) != 0
        assert handle.job_id not in queue().split()
    finally:
        backend.close()
