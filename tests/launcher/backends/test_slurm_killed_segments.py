"""The Slurm backend removes the MPICH segment that a killed or cancelled 2-task job
(``srun --mpi=pmi2``) leaves in /dev/shm, when the job ran on this host (the one-node
cluster of tests/slurm_cluster.py). Trial htrial15 found one 2 MB ``mpich_shm_*`` file
left by each of: a ``scancel`` of a running job, the resume's cancel of an earlier
run's jobs (`begin_study`), the trainer's own cancel when it stops (`close`). The
segment's name is computed from the job id (`mpich_shm.mpich_segments`), independently
of how the backend finds it (the ranks' /proc/PID/maps)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mpich_shm import mpich_segments
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from waiting import wait_until

from melissa_trainer.launcher.backends import Handle, Job, SlurmBackend

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: each rank says it is past MPI_Init, then waits to be killed
WAITING_RANKS = """
import time
from mpi4py import MPI
open(f"rank{MPI.COMM_WORLD.Get_rank()}", "w").close()
time.sleep(300)
"""


def backend_for(cluster: SlurmCluster, here: Path) -> SlurmBackend:
    if cluster.cpus < 2:
        pytest.skip(f"the node has {cluster.cpus} CPU; a 2-task job needs 2")
    pytest.importorskip("mpi4py")
    (here / "ranks.py").write_text(WAITING_RANKS)
    # no lease: the "earlier run" of the begin_study test must not cancel its own job
    return SlurmBackend(
        poll_every=0.2, srun_args=["--mpi=pmi2"], script_dir=here, lease_timeout=None
    )


def start(backend: SlurmBackend, here: Path, name: str = "mpiwait") -> tuple[Handle, range]:
    """Launch the 2-task job; return once both ranks are past MPI_Init and the job's
    segment exists; its handle and its job id (as a range, for `mpich_segments`)."""
    job = Job(name, [sys.executable, "ranks.py"], cwd=here, ranks=2, log_path=here / "job.log")
    handle = backend.launch(job)
    ids = range(int(handle.job_id), int(handle.job_id) + 1)  # type: ignore[attr-defined]
    wait_until(
        lambda: (here / "rank0").exists() and (here / "rank1").exists(),
        "both ranks past MPI_Init",
        90,
        interval=0.1,
    )
    assert mpich_segments(ids), "no MPICH segment named after the job's step"
    return handle, ids


@pytest.mark.timeout(180)
def test_a_running_job_cancelled_by_scancel_leaves_no_segment(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    backend = backend_for(slurm_cluster, tmp_path)
    try:
        handle, ids = start(backend, tmp_path)
        job_id = handle.job_id  # type: ignore[attr-defined]
        # the backend's looks (while it polls the running job) have found the segment
        wait_until(
            lambda: backend.poll(handle) is None and backend._batch._shm.seen(job_id),  # type: ignore[union-attr]
            "the backend to find the running job's segment",
            60,
            interval=0.05,
        )
        slurm_cluster.run("scancel", job_id)
        wait_until(lambda: backend.poll(handle) is not None, "the cancelled job's end", 60)
        assert not mpich_segments(ids), "the scancelled job's segment is left"
    finally:
        backend.close()


@pytest.mark.timeout(180)
def test_a_job_scancelled_before_the_backend_saw_it_run_leaves_no_segment(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """No poll while it ran, so no look found its segment: the backend sweeps the names
    MPICH gives its steps once it has ended (ours, held by no live process)."""
    backend = backend_for(slurm_cluster, tmp_path)
    try:
        handle, ids = start(backend, tmp_path)
        slurm_cluster.run("scancel", handle.job_id)  # type: ignore[attr-defined]
        wait_until(lambda: backend.poll(handle) is not None, "the cancelled job's end", 60)
        assert not mpich_segments(ids), "the scancelled job's segment is left"
    finally:
        backend.close()


@pytest.mark.timeout(180)
def test_the_trainers_close_leaves_no_segment(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`close` (the trainer's stop, SIGTERM included) reads the ranks' segments before it
    cancels them: no poll needs to have looked."""
    backend = backend_for(slurm_cluster, tmp_path)
    try:
        _, ids = start(backend, tmp_path)
    finally:
        backend.close()
    assert not mpich_segments(ids), "the closed backend's job left its segment"


@pytest.mark.timeout(180)
def test_the_resumes_cancel_of_an_earlier_runs_job_leaves_no_segment(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An earlier run (killed: never closed, never polled) left its job running; the next
    run's `begin_study` cancels it, and removes its segment."""
    earlier = backend_for(slurm_cluster, tmp_path)
    earlier.begin_study("segtest")
    _, ids = start(earlier, tmp_path, "sim-0")
    resumed = backend_for(slurm_cluster, tmp_path)
    try:
        resumed.begin_study("segtest")
        assert not mpich_segments(ids), "the earlier run's cancelled job left its segment"
    finally:
        resumed.close()
        earlier.close()
