"""The shared-memory segments MPICH (ch4, 5.0.x) leaves in /dev/shm when an MPI job dies
before MPI_Finalize: named after the job's PMI key-value space, which ``srun
--mpi=pmi2`` calls "<job>.<step>", so a later step of the same name attaches to the
stale segment and fails in MPI_Init (docs/how-to/slurm.md, "A stale MPICH segment").

With the helpers of the tests of the launcher's segment removal
(tests/launcher/test_mpich_shm.py, test_mpich_shm_sweep.py): their marks (`mpi_test`), the
`leftovers` fixture (imported as ``leftovers_fixture``, with ``# noqa: F401``; a test
asks for it as ``leftovers``), and `past_mpi_init`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec
from waiting import wait_until

SHM = Path("/dev/shm")
#: the tests' mpiexec (`helpers.find_mpiexec`), None without one
MPIEXEC = find_mpiexec()
needs_shm = pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm (Linux only)")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason=NO_MPI)


def mpi_test(test: Callable[..., None]) -> Callable[..., None]:
    """An end-to-end test with the tests' mpiexec (skipped without it, or off Linux)."""
    marks = [needs_shm, needs_mpi]
    for mark in [*marks, pytest.mark.e2e, pytest.mark.timeout(120)]:
        test = mark(test)
    return test


#: step ids searched per job (a test's job runs one step, or a few)
MAX_STEPS = 16


def fnv1a(text: str) -> int:
    """32-bit FNV-1a: MPICH's hash of the key-value-space name (its ``world_id``)."""
    value = 2166136261
    for byte in text.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def segment_names(kvs_name: str, node: int = 0) -> tuple[str, str]:
    """MPICH's names, in /dev/shm, for the segments of key-value space `kvs_name` on
    node `node` (its index in the job)."""
    world = f"{fnv1a(kvs_name):x}"
    return f"mpich_shm_{world}_{node}", f"mpich_vci_{world}_{node}"


def mpich_segments(job_ids: range, steps: int = MAX_STEPS) -> list[Path]:
    """The existing files in /dev/shm that MPICH names after these Slurm jobs' steps
    0..`steps` - 1 on node 0 (the test cluster's one node)."""
    present = set(os.listdir(SHM)) if SHM.is_dir() else set()
    names = (
        name for job in job_ids for step in range(steps) for name in segment_names(f"{job}.{step}")
    )
    return [SHM / name for name in names if name in present]


def past_mpi_init(here: Path, ranks: int) -> list[str]:
    """Wait (60 s) until `ranks` ranks in `here` are past MPI_Init, each having written
    its file ``rank<N>`` (whole: renamed into place); what each wrote, by rank."""
    wait_until(
        lambda: all((here / f"rank{r}").exists() for r in range(ranks)),
        f"{ranks} ranks past MPI_Init in {here}",
        60,
    )
    return [(here / f"rank{r}").read_text() for r in range(ranks)]


@pytest.fixture(name="leftovers")
def leftovers_fixture() -> Iterator[set[Path]]:
    """Files a test saw its jobs map or hold: removed after it, whatever it found."""
    seen: set[Path] = set()
    yield seen
    for path in seen:
        path.unlink(missing_ok=True)
