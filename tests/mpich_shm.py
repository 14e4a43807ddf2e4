"""The shared-memory segments MPICH (ch4, 5.0.x) leaves in /dev/shm when an MPI job dies
before MPI_Finalize: named after the job's PMI key-value space, which ``srun
--mpi=pmi2`` calls "<job>.<step>", so a later step of the same name attaches to the
stale segment and fails in MPI_Init (docs/how-to/slurm.md, "A stale MPICH segment").

With the helpers of the tests of the launcher's segment removal
(tests/launcher/test_mpich_shm.py, test_mpich_shm_sweep.py): their marks (`mpi_test`), the
`leftovers` fixture (imported as ``leftovers_fixture``, with ``# noqa: F401``; a test
asks for it as ``leftovers``), and `past_mpi_init`. And the guard of every test
(`ShmGuard`, run by conftest.py): a warning names the test during which an MPICH file
appeared that nobody holds, what its name tells of its maker (`origin`), and the files
of a Slurm test cluster's steps that nobody holds when its module's tests are done
(`warn_unheld_steps`, run by tests/slurm_cluster.py before its stop removes them)."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec
from waiting import wait_until

from melissa_trainer.launcher.backends.file_holders import holders

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


# -- the guard: MPICH files that appear during a test and that nobody holds --------------


class LeakWarning(UserWarning):
    """An MPICH file appeared in /dev/shm during a test and nobody holds it: a job that
    ended before ``MPI_Finalize`` left it (about 1 MB of the node's memory per rank)."""


def _mpich_files() -> dict[str, int]:
    """MPICH's files in the real /dev/shm (not a test's stand-in): name -> inode."""
    try:
        with os.scandir(SHM) as entries:
            return {e.name: e.inode() for e in entries if e.name.startswith("mpich_")}
    except OSError:
        return {}


class ShmGuard:
    """Says (`LeakWarning`) the MPICH files that appear in /dev/shm during a test and that
    no live process holds, naming the test: at its end (`after`), or, for a file a
    dying process still held then, at the end of the worker's session (`finish`).

    Nothing on a file names the process that made it, and /dev/shm is the machine's: a
    file that another xdist worker's test, another pytest or any MPI job of the machine
    left during the test is named too. So it warns, never fails: a test must not fail
    for another program's file (a warning names the test to rerun alone, under
    ``unshare -m`` with a tmpfs on /dev/shm, to be sure)."""

    def __init__(self) -> None:
        #: files new at a test's end that a live process held: path -> (inode, test)
        self.held: dict[str, tuple[int, str]] = {}

    @staticmethod
    def before() -> dict[str, int]:
        return _mpich_files()

    def after(self, before: dict[str, int], test: str) -> None:
        new = {f"{SHM}/{n}": i for n, i in _mpich_files().items() if before.get(n) != i}
        busy = holders(list(new)) if new else {}
        for path, ino in new.items():
            if busy is None or path in busy:
                self.held[path] = (ino, test)
            else:
                _warn(path, test, "at its end")

    def finish(self) -> None:
        held, self.held = self.held, {}
        now = _mpich_files()
        left = {p: t for p, (i, t) in held.items() if now.get(Path(p).name) == i}
        busy = holders(list(left)) if left else {}
        for path, test in left.items():
            if busy is not None and path not in busy:
                _warn(path, test, "at the session's end (a process held it at the test's end)")


def warn_unheld_steps(job_ids: range, who: str) -> None:
    """Say (`LeakWarning`) the files of these Slurm jobs' steps (`mpich_segments`) that
    exist now and that no live process holds, naming `who` (a test module): called when
    its tests are done, before its cluster's stop removes them with those of the jobs
    the stop itself kills. A file still held at a test's end and left after (by the
    product, or the test) was removed so, unsaid, as the guard's `finish` came later."""
    paths = [str(path) for path in mpich_segments(job_ids)]
    busy = holders(paths) if paths else {}
    for path in paths:
        if busy is not None and path not in busy:
            _warn(path, who, "when its tests were done (the cluster's stop removes it)")


def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return 4_194_304  # (Linux's largest)


def origin(name: str) -> str:
    """What the name of MPICH's file `name` says of the job that made it (MPICH 5.0.x),
    for tracing a leak: "" when nothing.

    ``mpich_shar_tmpXXXXXX`` (mkstemp): a communicator's segment other than MPI_Init's
    (``MPI_Comm_split_type``, a shared window, node collectives), unlinked by MPICH once
    every rank has attached; this suite's jobs and the package make none (no sub-
    communicator in tests/ nor melissa_trainer/). ``mpich_shm_<hex>_<node>``: ``<hex>``
    is the job's world id: the pid for a singleton (``MPI_Init`` without mpiexec), else
    the FNV-1a hash of its key-value space's name (`segment_names`: "<job>.<step>" for
    ``srun --mpi=pmi2``, random for hydra's), above the largest pid but for 1 in 10^5."""
    if name.startswith("mpich_shar_tmp"):
        return (
            "a communicator's segment (MPI_Comm_split_type, a shared window), which this "
            "suite's jobs never make: another program's"
        )
    world = re.fullmatch(r"mpich_(?:shm|vci)_([0-9a-f]+)_\d+", name)
    if world and int(world[1], 16) <= _pid_max():
        return f"an MPI singleton's, pid {int(world[1], 16)} (MPI_Init without mpiexec)"
    if world:
        return 'a job\'s, named after its key-value space (srun --mpi=pmi2: "<job>.<step>")'
    return ""


def _warn(path: str, test: str, when: str) -> None:
    said = origin(Path(path).name)
    warnings.warn(
        LeakWarning(
            f"{path} appeared during {test} and nobody holds it {when}: an MPI job ended "
            "before MPI_Finalize left it (or another program of this machine did: rerun "
            "the test alone to be sure); its cleanup must remove it"
            + (f"; by its name, {said}" if said else "")
        ),
        stacklevel=2,
    )
