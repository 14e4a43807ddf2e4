"""One node-down counts once against the node (`node_failures`), on the real two-node
cluster (tests/slurm_two_nodes.py): node n1 vanishing (a power loss) while it runs two
of the study's batch jobs, submitted ``--no-requeue`` (JobRequeue=0 sites: Slurm ends
them NODE_FAIL, both at the same EndTime, instead of requeueing them), is one failure
of n1, not one per job: with ``exclude_after=2`` n1 is not left out, and the jobs
submitted once it is back run there. A second power loss, with no job completed on n1
in between, is its second failure in a row: n1 is left out from then on.

Failed before (one failure per job): the first power loss alone excluded n1 (its two
jobs' NODE_FAIL counted twice), and every job submitted after it carried
``--exclude=n1``.

The stand-in test of the same rule: test_slurm_node_exclusion.py::
test_one_node_down_counts_once_however_many_jobs_it_ended."""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path

import pytest
from launcher_said import one_line
from slurm_jobs import POLL, queue
from slurm_two_nodes import OTHER, TwoNodeCluster, two_node_cluster

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: seconds each phase may take at most (a bound on a loaded CI machine, not a measure)
PHASE = 300


def _wait(what: str, done, cluster: TwoNodeCluster) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + PHASE
    while not done():
        assert time.monotonic() < deadline, f"{what} after {PHASE} s\n{cluster.logs()}"
        time.sleep(POLL)


def _on_n1(
    backend: SlurmBackend, cluster: TwoNodeCluster, tmp_path: Path, tag: str, n: int
) -> list[SlurmHandle]:
    """`n` batch jobs that wait (for ever) once started; returned once squeue lists each
    running on n1 (this host's CPUs are held: n1's are the only free ones)."""
    handles: list[SlurmHandle] = []
    for i in range(n):
        job = Job(
            f"{tag}-{i}", ["sleep", "600"], cwd=tmp_path, log_path=tmp_path / f"{tag}-{i}.log"
        )
        handle = backend.launch(job)
        assert isinstance(handle, SlurmHandle)
        handles.append(handle)

    def running() -> bool:
        for handle in handles:
            backend.poll(handle)
        return all(h.state == "RUNNING" and h.node == OTHER for h in handles)

    _wait(f"jobs {tag} not running on {OTHER}", running, cluster)
    return handles


def _ended(backend: SlurmBackend, handles: list[SlurmHandle]) -> bool:
    return all([backend.poll(handle) is not None for handle in handles])  # (each polled)


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNINGs that n1 is left out (or would be)."""
    return [
        one_line(r.getMessage())
        for r in caplog.records
        if f"node {OTHER} failed" in one_line(r.getMessage())
    ]


def _script(tmp_path: Path, name: str) -> str:
    return (tmp_path / "scripts" / f"{name}.sbatch").read_text()


@pytest.mark.timeout(4 * PHASE)
def test_one_power_loss_with_two_jobs_on_the_node_does_not_leave_it_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "melissa_trainer")
    with two_node_cluster() as cluster:
        if cluster.cpus < 2:
            pytest.skip("n1 holds one job at a time here (1 CPU): no two jobs on it")
        n = cluster.cpus  # (n1's CPUs, one job each)
        # this host's CPUs held (a job outside the study): the study's jobs go to n1
        holder = cluster.run(
            "sbatch", "--parsable", f"-w{cluster.node}", f"-c{cluster.cpus}",
            "-o", "/dev/null", "--wrap", "sleep 3000",
        ).strip()  # fmt: skip
        _wait("the holder not running", lambda: f"{holder} wrap RUNNING" in queue(), cluster)
        backend = SlurmBackend(
            poll_every=POLL, extra_args=["--no-requeue"], script_dir=tmp_path / "scripts"
        )
        try:
            for down in ("a", "b"):
                handles = _on_n1(backend, cluster, tmp_path, down, n)
                for i in range(n):  # (submitted after the first loss: no exclusion)
                    assert "--exclude" not in _script(tmp_path, f"{down}-{i}")
                cluster.vanish()
                _wait(
                    f"jobs {down} not ended", functools.partial(_ended, backend, handles), cluster
                )
                assert [h.final for h in handles] == ["NODE_FAIL"] * n, handles
                if down == "a":  # (one power loss: one failure, not n)
                    assert _said(caplog) == [], _said(caplog)
                    cluster.revive()
                    _wait("n1 not back", lambda: cluster.node_states()[OTHER] == "idle", cluster)
            # the second loss, no success on n1 between: its second failure in a row
            said = _said(caplog)
            assert len(said) == 1 and "failed 2 attempts" in said[0], said
            assert "exclude_after=2" in said[0] and f"--exclude={OTHER}" in said[0], said
            backend.launch(Job("c-0", ["true"], cwd=tmp_path))
            assert f"#SBATCH --exclude={OTHER}" in _script(tmp_path, "c-0")
        finally:
            backend.close()
            cluster.run("scancel", holder)
