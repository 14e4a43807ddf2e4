"""An ``mpiexec`` job the launcher stops leaves no MPICH segment in /dev/shm.

MPICH (ch4, the ``mpich`` wheel 5.0.2) creates ``/dev/shm/mpich_shm_<hash>_<node>`` in
``MPI_Init`` and unlinks it in ``MPI_Finalize`` only: every job killed before it left its
file (about 1 MB of the node's memory per rank: a tmpfs) until `MpiexecBackend` removed
the files its ranks had mapped (`mpich_segments`). Before that, each test below but the
first and the last failed with the job's file still there, on every stop path: `kill`
(a timeout, a refused simulation, the failure policy), ranks ignoring SIGTERM
(SIGKILLed after the grace), a 1-rank job, the launcher's stop (the study's end, the
trainer's SIGTERM), a job whose rank crashed. A launcher killed with SIGKILL cannot
remove anything: its jobs' files stayed until the next run of its study removed those
its backend had recorded (`SegmentRecord`; the last test failed before that).
"""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from helpers import NO_MPI
from mpich_shm import (
    MPIEXEC,
    SHM,
    leftovers_fixture,  # noqa: F401 (the fixture "leftovers")
    mpi_test,
    needs_shm,
    past_mpi_init,
)
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, LocalBackend, MpiexecBackend
from melissa_trainer.launcher.backends.mpich_removal import Segment, remove_segments
from melissa_trainer.launcher.backends.mpich_segments import LOOKS_AT, SegmentWatch, mapped_segments
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.tuning import LauncherTuning

#: a rank: says its pid in rank<N> once past MPI_Init, then waits (SIGTERM ignored with
#: "ignore"; the last rank SIGSEGVs itself once the file "crash" exists with "crash").
#: Run without mpiexec, a singleton (rank 0 of 1).
RANK = """
import os, signal, sys, time
from pathlib import Path
from mpi4py import MPI

here, mode = Path(sys.argv[1]), sys.argv[2]
rank = MPI.COMM_WORLD.Get_rank()
if mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
(here / f"rank{rank}.tmp").write_text(str(os.getpid()))
(here / f"rank{rank}.tmp").rename(here / f"rank{rank}")
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    if mode == "crash" and rank == MPI.COMM_WORLD.Get_size() - 1 and (here / "crash").exists():
        os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(0.05)
"""


def the_jobs_files(pids: list[int]) -> set[Path]:
    """The MPICH files in /dev/shm that processes `pids` map, read here independently of
    `mpich_segments` (a test of it must not trust it)."""
    found = set()
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            path = line.split(maxsplit=5)[-1]
            if path.startswith("/dev/shm/mpich_") and not path.endswith("(deleted)"):
                found.add(Path(path))
    return found


def started(here: Path, ranks: int) -> list[int]:
    """Wait until `ranks` ranks in `here` are past MPI_Init; their pids."""
    return [int(pid) for pid in past_mpi_init(here, ranks)]


def rank_command(here: Path, mode: str = "wait") -> list[str]:
    (here / "rank.py").write_text(RANK)
    return [sys.executable, str(here / "rank.py"), str(here), mode]


@needs_shm
def test_only_the_file_the_job_mapped_is_removed() -> None:
    """A segment is the file (device, inode) a rank mapped: a file made since under the
    same name, and an unlinked one, are left alone; other files are not segments."""
    path = SHM / f"mpich_shm_test{uuid.uuid4().hex}_0"
    other = SHM / f"mine_{uuid.uuid4().hex}"
    try:
        for file in (path, other):
            file.write_bytes(b"\0" * 4096)
        with path.open("r+b") as mapped, other.open("r+b") as also:
            view, view2 = mmap.mmap(mapped.fileno(), 4096), mmap.mmap(also.fileno(), 4096)
            # (this test process may hold an MPICH segment of its own: a test of the same
            # pytest worker that initialised MPI in-process; only this test's files count)
            found = mapped_segments([os.getpid(), 2**22 + 1])  # (no such process)
            assert all(s.path.startswith(str(SHM / "mpich_")) for s in found)
            segments = [s for s in found if s.path.startswith(str(SHM / "mpich_shm_test"))]
            assert [s.path for s in segments] == [str(path)]
            path.unlink()  # mapped, unlinked: "(deleted)" in maps
            assert str(path) not in [s.path for s in mapped_segments([os.getpid()])]
            path.write_bytes(b"\0")  # another file under the job's name
            assert remove_segments(segments) == []
            assert path.exists()
            view.close()
            view2.close()
        path.unlink()
        assert remove_segments(segments) == []  # gone: nothing to do, nothing said
    finally:
        path.unlink(missing_ok=True)
        other.unlink(missing_ok=True)


def test_a_watch_looks_at_its_times_until_it_finds_a_segment() -> None:
    """A running job is read at each of `LOOKS_AT` after its launch, not between, and no
    more once something is found or the last has passed (a job with no MPI)."""
    watch = SegmentWatch()
    watch.launched = time.monotonic() + 3600  # not yet at the first time
    assert not watch.due()
    for at in LOOKS_AT:
        watch.launched = time.monotonic() - at - 0.01
        assert watch.due()
        watch.look([2**22 + 1])  # (no such process: nothing found)
        assert not watch.due()  # (the next time has not come)
    watch.launched = time.monotonic() - 10 * LOOKS_AT[-1]
    assert watch.looks == len(LOOKS_AT) and not watch.due()
    found = SegmentWatch()
    found.segments = [Segment("/dev/shm/mpich_shm_0_0", (0, 0), 1)]
    found.launched = time.monotonic() - LOOKS_AT[0]
    assert not found.due()


@pytest.mark.parametrize(
    ("ranks", "mode"),
    [(2, "wait"), (1, "wait"), (2, "ignore")],
    ids=["2 ranks", "1 rank", "SIGTERM ignored"],
)
@mpi_test
def test_a_killed_job_leaves_no_segment(
    tmp_path: Path, leftovers: set[Path], ranks: int, mode: str
) -> None:
    """`kill` (a timeout, a refusal, the failure policy): the job's file is gone."""
    backend = MpiexecBackend(MPIEXEC or "mpiexec")
    job = Job("sim-0", rank_command(tmp_path, mode), log_path=tmp_path / "log", ranks=ranks)
    handle = backend.launch(job)
    try:
        pids = started(tmp_path, ranks)
        wait_until(lambda: the_jobs_files(pids), "the ranks' MPICH segment", 30)
        files = the_jobs_files(pids)
        leftovers.update(files)
        # what the docs say a file costs: about 1 MB of the node's memory per rank
        assert all(f.stat().st_size > ranks * 10**6 for f in files), files
        backend.kill(handle, grace=1.0)
    finally:
        backend.close()
    assert [f for f in files if f.exists()] == [], f"left by the killed job: {files}"


@mpi_test
def test_the_launchers_stop_leaves_no_segment(tmp_path: Path, leftovers: set[Path]) -> None:
    """`Launcher.stop` (the study's end, the trainer's SIGTERM) with 2 jobs running."""
    dirs = [tmp_path / f"sim{i}" for i in range(2)]
    for here in dirs:
        here.mkdir()
    (tmp_path / "rank.py").write_text(RANK)
    launcher = Launcher(
        [sys.executable, str(tmp_path / "rank.py"), str(tmp_path / "sim{simulation_id}"), "wait"],
        [{"a": 0.0}, {"a": 1.0}],
        2,
        backend=MpiexecBackend(MPIEXEC or "mpiexec"),
        ranks_per_simulation=2,
        job_limit=2,
        log_dir=tmp_path / "logs",
        tuning=LauncherTuning(max_restarts=0, on_failure="abandon", systematic_failures=None),
    )
    launcher.start(tmp_path / "rdv", study_dir=tmp_path)
    try:
        pids = [pid for here in dirs for pid in started(here, 2)]
        wait_until(lambda: len(the_jobs_files(pids)) == 2, "the 2 jobs' segments", 30)
        files = the_jobs_files(pids)
        leftovers.update(files)
    finally:
        launcher.stop()
    assert [f for f in files if f.exists()] == [], f"left by the stopped jobs: {files}"


@mpi_test
def test_a_job_whose_rank_crashed_leaves_no_segment(tmp_path: Path, leftovers: set[Path]) -> None:
    """Rank 1 SIGSEGVs: hydra ends the job by itself; the backend read the segment while
    the job ran (`LOOKS_AT`) and removes it when `poll` sees the end."""
    backend = MpiexecBackend(MPIEXEC or "mpiexec")
    job = Job("sim-0", rank_command(tmp_path, "crash"), log_path=tmp_path / "log", ranks=2)
    handle = backend.launch(job)
    try:
        pids = started(tmp_path, 2)
        wait_until(lambda: the_jobs_files(pids), "the ranks' MPICH segment", 30)
        files = the_jobs_files(pids)
        leftovers.update(files)
        wait_until(
            lambda: backend.poll(handle) is None and handle.shm.segments,  # type: ignore[attr-defined]
            "the backend's look at the ranks' segments",
            60,
        )
        (tmp_path / "crash").touch()
        wait_until(lambda: backend.poll(handle) is not None, "the job's end", 60)
        assert backend.poll(handle) != 0
    finally:
        backend.close()
    assert [f for f in files if f.exists()] == [], f"left by the crashed job: {files}"


@needs_shm
@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["wait", "crash"], ids=["killed", "crashed"])
def test_an_mpi_singletons_segment_is_removed_by_the_local_backend(
    tmp_path: Path, leftovers: set[Path], mode: str
) -> None:
    """A Python solver with mpi4py run by the local backend (no mpiexec: an MPI
    singleton, whose segment is named after its pid) and killed, or crashed after the
    backend's first look: its file is gone."""
    pytest.importorskip("mpi4py")
    backend = LocalBackend()
    handle = backend.launch(Job("sim-0", rank_command(tmp_path, mode), log_path=tmp_path / "log"))
    try:
        pids = started(tmp_path, 1)
        wait_until(lambda: the_jobs_files(pids), "the singleton's MPICH segment", 30)
        files = the_jobs_files(pids)
        leftovers.update(files)
        if mode == "wait":
            backend.kill(handle, grace=1.0)
        else:
            wait_until(
                lambda: backend.poll(handle) is None and handle.shm.segments,
                "the backend's look at the singleton's segment",
                60,
            )
            (tmp_path / "crash").touch()
            wait_until(lambda: backend.poll(handle) is not None, "the job's end", 60)
            assert backend.poll(handle) == -signal.SIGSEGV
    finally:
        backend.close()
    assert [f for f in files if f.exists()] == [], f"left by the singleton ({mode}): {files}"


@needs_shm
@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["mpiexec", "local"])
def test_a_sigkilled_launchers_segments_are_removed_by_the_next_run_of_its_study(
    tmp_path: Path, leftovers: set[Path], backend: str
) -> None:
    """The launcher's process is SIGKILLed once its backend has seen its job's segment;
    its mpiexec (or singleton) gets SIGTERM (parent-death signal) and ends its ranks,
    and nobody is left to remove the file. The backend had recorded it
    (`SegmentRecord`, in /dev/shm): the next run of the same study on this node
    removes it at `begin_study`, and the record too. (Before the record, the file
    stayed.)"""
    pytest.importorskip("mpi4py")
    if backend == "mpiexec" and MPIEXEC is None:
        pytest.skip(NO_MPI)
    study, ranks = f"t{uuid.uuid4().hex[:7]}", 2 if backend == "mpiexec" else 1
    make = f"MpiexecBackend({MPIEXEC!r})" if backend == "mpiexec" else "LocalBackend()"
    code = textwrap.dedent(
        f"""
        import pathlib, threading, time
        from melissa_trainer.launcher.backends import Job, LocalBackend, MpiexecBackend
        backend = {make}
        backend.begin_study({study!r})
        handle = backend.launch(Job("sim-0", {rank_command(tmp_path)!r}, ranks={ranks},
                                    log_path={str(tmp_path / "log")!r}))
        while backend.poll(handle) is None and not handle.shm.segments:
            time.sleep(0.05)  # (the launcher's polls)
        pathlib.Path({str(tmp_path / "seen")!r}).touch()
        threading.Event().wait()
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", code])
    record = SHM / f"melissa_trainer_{study}_{os.geteuid()}.segments"
    try:
        pids = started(tmp_path, ranks)
        wait_until(lambda: (tmp_path / "seen").exists(), "the backend's look", 60, procs=[owner])
        files = the_jobs_files(pids)
        leftovers.update(files)
        listed = {Path(line.split()[0]) for line in record.read_text().splitlines()}
        assert files and listed == files, (listed, files)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    wait_until(lambda: not any(_alive(pid) for pid in pids), "the ranks' end", 30)
    after = MpiexecBackend(MPIEXEC) if backend == "mpiexec" and MPIEXEC else LocalBackend()
    after.begin_study(study)
    assert [f for f in files if f.exists()] == [], f"left by the killed run's job: {files}"
    assert not record.exists()
    after.close()


def _alive(pid: int) -> bool:
    """`pid` runs (not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@mpi_test
def test_a_job_killed_with_its_launcher_before_any_look_leaves_no_segment(
    tmp_path: Path, leftovers: set[Path]
) -> None:
    """The launcher's process is SIGKILLed before its backend ever looked at its job
    (its first look comes 0.5 s after the launch; here the job is never polled): no
    segment of it was recorded, but its launch was, before the job started. The next
    run of the study sweeps the files of ours made since that nobody holds: the job's.
    (Before the launch was recorded, its file stayed.)"""
    study = f"t{uuid.uuid4().hex[:7]}"
    code = textwrap.dedent(
        f"""
        import threading
        from melissa_trainer.launcher.backends import Job, MpiexecBackend
        backend = MpiexecBackend({MPIEXEC!r})
        backend.begin_study({study!r})
        backend.launch(Job("sim-0", {rank_command(tmp_path)!r}, ranks=2,
                           log_path={str(tmp_path / "log")!r}))
        threading.Event().wait()  # (no poll: no look)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", code])
    record = SHM / f"melissa_trainer_{study}_{os.geteuid()}.segments"
    try:
        pids = started(tmp_path, 2)
        files = the_jobs_files(pids)
        leftovers.update(files)
        assert files, f"the ranks {pids} map no MPICH file"
        listed = [line.split()[0] for line in record.read_text().splitlines()]
        assert listed == ["launch"], listed  # (no segment seen)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    wait_until(lambda: not any(_alive(pid) for pid in pids), "the ranks' end", 30)
    after = MpiexecBackend(MPIEXEC or "mpiexec")
    after.begin_study(study)
    assert [f for f in files if f.exists()] == [], f"left by the killed run's job: {files}"
    assert not record.exists()
    after.close()
