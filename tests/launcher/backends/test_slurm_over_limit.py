"""A batch job over a limit of the cluster's, which Slurm accepts (``EnforcePartLimits=NO``,
its default) and never starts: a `time_limit` above the partition's ``MaxTime`` waits
``PENDING`` (``PartitionTimeLimit``) while the study waits for it. Found in a user trial
(docs/how-to/slurm.md's script, ``time_limit="00:30:00"``, the one-node test cluster's
partition set to ``MaxTime=10``): the study launched nothing and said only the bare
reason in its queue notice. Now one WARNING names the limit, the option and the fix
(`limits.OverLimit`), and the queue notice names the reason as over a limit. Failed
before: no warning; queue_reason was the bare "PartitionTimeLimit"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, finish
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.limits import OverLimit

LOGGER = "melissa_trainer.launcher.backends.slurm"


def _over(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "over a limit" in r.getMessage()
    ]


def test_each_reason_is_said_once_for_the_backend(caplog: pytest.LogCaptureFixture) -> None:
    """squeue's successive answers for several jobs of one request: one WARNING per
    reason, not per job nor per answer; nothing for a reason of the queue's load."""
    caplog.set_level("WARNING", logger=LOGGER)
    limits = OverLimit("00:30:00")
    for job_id in ("17", "18", "17", "18"):
        limits.see(f"sim (Slurm job {job_id})", job_id, "PENDING", "PartitionTimeLimit")
    limits.see("sim (Slurm job 19)", "19", "PENDING", "Resources")
    limits.see("sim (Slurm job 19)", "19", "RUNNING", "QOSMaxWallDurationPerJobLimit")
    said = _over(caplog)
    assert len(said) == 1, said
    assert "SlurmBackend's time_limit is '00:30:00' (--time=00:30:00)" in said[0], said
    assert "scontrol update JobId=17 TimeLimit=" in said[0], said
    assert OverLimit(None).see("s", "1", "PENDING", "PartitionTimeLimit") is not None
    assert len(_over(caplog)) == 2


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.xdist_group("slurm")
@pytest.mark.timeout(180)
def test_a_time_limit_over_the_partitions_is_said_once(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    partition = slurm_cluster.partition
    slurm_cluster.run("scontrol", "update", f"PartitionName={partition}", "MaxTime=10")
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path, time_limit="00:30:00")
    backend.begin_study("over_limit")
    try:
        handles = [
            backend.launch(Job(f"sim-{i}", ["true"], cwd=tmp_path, log_path=tmp_path / "log"))
            for i in range(2)
        ]
        assert all(isinstance(h, SlurmHandle) for h in handles)
        first = handles[0]
        assert isinstance(first, SlurmHandle)
        wait_until(
            lambda: all(
                backend.poll(h) is None and getattr(h, "reason", None) == "PartitionTimeLimit"
                for h in handles
            ),
            what=lambda: (
                f"both jobs over the limit ({[getattr(h, 'reason', None) for h in handles]})"
            ),
            timeout=UNTIL_TEST_TIMEOUT,
        )
        for _ in range(3):  # (said once, not at each answer nor for each job)
            for handle in handles:
                backend.poll(handle)
        said = _over(caplog)
        assert len(said) == 1, said
        assert said[0].startswith(
            f"sim-0 (Slurm job {first.job_id}) waits in Slurm's queue over a limit (squeue: "
            "PENDING, PartitionTimeLimit): its time limit"
        ), said
        assert "above its partition's MaxTime" in said[0], said
        assert "SlurmBackend's time_limit is '00:30:00'" in said[0], said
        reason = backend.queue_reason(first)
        assert reason is not None and reason.startswith("PartitionTimeLimit: over a limit"), reason
        assert not backend.started(first)
        # the limit lifted, the same jobs start: "never starts while that limit stands"
        slurm_cluster.run("scontrol", "update", f"PartitionName={partition}", "MaxTime=INFINITE")
        for handle in handles:
            assert finish(backend, handle, timeout=UNTIL_TEST_TIMEOUT) == 0
    finally:
        slurm_cluster.run("scontrol", "update", f"PartitionName={partition}", "MaxTime=INFINITE")
        backend.close()
    assert len(_over(caplog)) == 1
