"""A batch job preempted on a one-node test cluster set up for it: a partition "high"
whose jobs preempt those of the default partition (PreemptType=preempt/partition_prio,
PreemptMode=CANCEL: the preempted job ends PREEMPTED). Said in a WARNING and in the
job's log (`queued_end.running_text`), as a time limit is (test_slurm_ended_by_slurm.py).
Failed before: no warning, the job read only as ``exit 143 (SIGTERM: ...)``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from launcher_said import one_line, said_in_log
from slurm_cluster import SlurmCluster, skip_reason
from slurm_jobs import POLL, finish
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

LOGGER = "melissa_trainer.launcher.backends.slurm"
#: what the cluster's slurm.conf gets (the default partition is PriorityTier=1)
PREEMPTION = """PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=high Nodes={node} MaxTime=INFINITE State=UP PriorityTier=2
"""


class PreemptingCluster(SlurmCluster):
    """tests/slurm_cluster.py's cluster with the partition "high" of `PREEMPTION`."""

    def _write_conf(self, munge_socket: Path, node_line: str) -> None:
        super()._write_conf(munge_socket, node_line)
        self.conf.write_text(self.conf.read_text() + PREEMPTION.format(node=self.node))


@pytest.fixture
def cluster() -> Iterator[SlurmCluster]:
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    started = PreemptingCluster()
    try:
        started.start()
        yield started
    finally:
        started.stop()


@pytest.mark.timeout(180)
def test_a_preempted_job_is_said_so(
    cluster: SlurmCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path, extra_args=["--exclusive"])
    backend.begin_study("preempted")
    log = tmp_path / "sim-0.log"
    try:
        handle = backend.launch(Job("sim-0", ["sleep", "600"], cwd=tmp_path, log_path=log))
        assert isinstance(handle, SlurmHandle)
        wait_until(
            lambda: backend.poll(handle) is None and handle.state == "RUNNING",
            what="the job to run",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        cluster.run("sbatch", "-p", "high", "--exclusive", "-o", "/dev/null", "--wrap", "true")
        code = finish(backend, handle, timeout=UNTIL_TEST_TIMEOUT)
    finally:
        backend.close()
    assert code != 0 and handle.final == "PREEMPTED", (code, handle.final)
    said = [  # (a WARNING cut into lines of 100 columns, as one line)
        one_line(r.getMessage())
        for r in caplog.records
        if r.levelno >= logging.WARNING and "was preempted" in r.getMessage()
    ]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert said[0].startswith(
        f"sim-0 (Slurm job {handle.job_id}) was preempted (squeue: PREEMPTED)"
    ), said
    assert said[0] in "\n".join(said_in_log(log.read_text()))
