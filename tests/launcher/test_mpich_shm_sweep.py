"""A job that fails before the backend saw its MPICH segment leaves none (the sweep).

The usual deterministic failure of an MPI solver comes right after ``MPI_Init``: a
segmentation fault, ``MPI_Abort``, ``exit(1)``; each restart repeats it. Its file
(``/dev/shm/mpich_shm_<hash>_<node>``, about 1 MB per rank) is made in ``MPI_Init`` and
the job is gone before the backend's first look at its ranks (0.5 s after the launch):
before the sweep (`mpich_segments.orphans`) every such job left its file. The tests below
that run MPI never poll the job while it runs (so no look), as if it had failed before
the first look, and failed that way before the sweep: the job's file was still there.
The sweep removes only files made since the launch, ours, that no live process holds
open or maps: a running job's file is never removed (tested with one running beside).
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mpich_shm import (
    MPIEXEC,
    leftovers_fixture,  # noqa: F401 (the fixture "leftovers")
    mpi_test,
    needs_shm,
    past_mpi_init,
)
from waiting import wait_until

from melissa_trainer.launcher.backends import (
    Job,
    LocalBackend,
    MpiexecBackend,
    file_holders,
    mpich_segments,
)
from melissa_trainer.launcher.backends.file_holders import dying, holders
from melissa_trainer.launcher.backends.mpich_record import SegmentRecord
from melissa_trainer.launcher.backends.mpich_removal import Segment
from melissa_trainer.launcher.backends.mpich_segments import (
    LOOKS_AT,
    SegmentWatch,
    listing,
    mapped_segments,
    orphans,
)

#: a rank: once past MPI_Init, reports its pid and the MPICH files it holds open (read
#: here from /proc, independently of `mpich_segments`) in rank<N>, waits for the file
#: "go", then fails as `mode` says: "segv" (the last rank's segmentation fault), "abort"
#: (MPI_Abort on every rank), "exit" (every rank's _exit(1), no MPI_Finalize), "wait"
#: (runs until killed). Run without mpiexec: a singleton (rank 0 of 1).
RANK = """
import json, os, signal, sys, time
from pathlib import Path
from mpi4py import MPI

here, mode = Path(sys.argv[1]), sys.argv[2]
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
files = []
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # (the listing's own descriptor)
        continue
    if target.startswith("/dev/shm/mpich_"):
        files.append(target)
(here / f"rank{rank}.tmp").write_text(json.dumps({"pid": os.getpid(), "files": files}))
(here / f"rank{rank}.tmp").rename(here / f"rank{rank}")
deadline = time.monotonic() + 120
while not (here / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.01)
if mode == "segv" and rank == comm.Get_size() - 1:
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "abort":
    comm.Abort(3)
if mode == "exit":
    os._exit(1)
while time.monotonic() < deadline:
    time.sleep(0.05)
"""


def reported(here: Path, ranks: int) -> set[Path]:
    """Wait until `ranks` ranks in `here` are past MPI_Init; the MPICH files they hold."""
    files = {Path(f) for text in past_mpi_init(here, ranks) for f in json.loads(text)["files"]}
    assert files, f"the ranks in {here} hold no MPICH file"
    return files


def rank_command(here: Path, mode: str) -> list[str]:
    here.mkdir(exist_ok=True)
    (here.parent / "rank.py").write_text(RANK)
    return [sys.executable, str(here.parent / "rank.py"), str(here), mode]


# -- the sweep, in a directory of its own (no other test's files) ----------------------


@pytest.fixture
def shm_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`mpich_segments` looks in `tmp_path` instead of /dev/shm."""
    monkeypatch.setattr(mpich_segments, "SHM_DIR", f"{tmp_path}/")
    return tmp_path


def test_the_sweep_removes_only_new_files_of_ours_that_nobody_holds(shm_dir: Path) -> None:
    """Made since `before`, an MPICH name, ours, not held open nor mapped by a live
    process: only such a file is an orphan."""
    old, replaced = shm_dir / "mpich_shm_old_0", shm_dir / "mpich_shm_replaced_0"
    for path in (old, replaced):
        path.write_bytes(b"\0" * 4096)
    before = listing()
    assert set(before) == {old.name, replaced.name}
    (shm_dir / "new").write_bytes(b"\0" * 4096)
    (shm_dir / "new").rename(replaced)  # a new file (inode) under an old name
    orphan, opened, mapped = (shm_dir / f"mpich_{n}_0" for n in ("vci_new", "shm_open", "shm_map"))
    other = shm_dir / "not_mpich_new"
    for path in (orphan, opened, mapped, other):
        path.write_bytes(b"\0" * 4096)
    held_open = os.open(opened, os.O_RDWR)  # (this process is a live one: as a rank in
    with mapped.open("r+b") as file:  # MPI_Init, and one after it, that closed its fd)
        view = mmap.mmap(file.fileno(), 4096)
    try:
        me = {os.getpid()}
        assert holders([str(opened), str(mapped), str(orphan)]) == {
            str(opened): me,
            str(mapped): me,
        }
        found = {s.path for s in orphans(before)}
        assert found == {str(orphan), str(replaced)}
        assert orphans(before, only=[orphan.name]) == [
            Segment(str(orphan), _dev(orphan), orphan.stat().st_ino)
        ]
        watch = SegmentWatch(before)
        assert sorted(watch.remove("sim-0")) == sorted([str(orphan), str(replaced)])
        assert all(p.exists() for p in (old, opened, mapped, other))
        assert watch.remove("sim-0") == []  # (once)
    finally:
        view.close()
        os.close(held_open)
    after = SegmentWatch(before)
    assert sorted(after.remove("sim-0")) == sorted([str(opened), str(mapped)])  # now free


def test_a_watch_that_found_segments_sweeps_nothing_else(shm_dir: Path) -> None:
    """The segments seen are the job's: the sweep is for a job none was seen of, and a
    watch without `before` (`SegmentWatch.off`, mpiexec's own process) never sweeps."""
    before = listing()
    theirs, seen = shm_dir / "mpich_shm_theirs_0", shm_dir / "mpich_shm_seen_0"
    for path in (theirs, seen):
        path.write_bytes(b"\0")
    watch = SegmentWatch(before)
    watch.segments = [Segment(str(seen), _dev(seen), seen.stat().st_ino)]
    assert watch.remove("sim-0") == [str(seen)]
    assert SegmentWatch().remove("sim-1") == []
    assert SegmentWatch.off().remove("sim-2") == [] and not SegmentWatch.off().due()
    assert theirs.exists()


def test_a_look_that_finds_nothing_narrows_the_sweep_to_later_files(shm_dir: Path) -> None:
    """A look that finds none of the job's files (not yet past MPI_Init) lists what
    exists then: those a live process holds are not the job's, and its sweep leaves
    them even once free (another job's, e.g. a Slurm step's, killed meanwhile and left
    for its own cleanup). One that nobody holds then may be the job's, its ranks dead
    before the look (tests/launcher/test_mpich_shm_look.py): it is swept."""
    watch = SegmentWatch(listing())
    earlier, later = shm_dir / "mpich_shm_earlier_0", shm_dir / "mpich_shm_later_0"
    dead = shm_dir / "mpich_shm_dead_0"
    for path in (earlier, dead):
        path.write_bytes(b"\0")
    watch.launched -= LOOKS_AT[0]
    assert watch.due()
    held = os.open(earlier, os.O_RDONLY)  # (this process: another job's live rank)
    try:
        watch.look([2**22 + 1])  # (no such process: nothing found)
    finally:
        os.close(held)
    later.write_bytes(b"\0")
    assert sorted(watch.remove("sim-0")) == [str(dead), str(later)]
    assert earlier.exists()


def test_a_file_a_rank_holds_open_but_has_not_mapped_is_found(shm_dir: Path) -> None:
    """A rank inside MPI_Init, between its shm_open and its mmap: the file is the job's
    (a kill at that moment removes it)."""
    path = shm_dir / "mpich_shm_opening_0"
    path.write_bytes(b"\0")
    fd = os.open(path, os.O_RDWR)
    try:
        found = [s for s in mapped_segments([os.getpid()]) if s.path == str(path)]
        assert found == [Segment(str(path), _dev(path), path.stat().st_ino)]
    finally:
        os.close(fd)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_the_sweep_leaves_another_users_file(shm_dir: Path) -> None:
    """Only our own files are swept (another user's job may still be starting)."""
    theirs = shm_dir / "mpich_shm_theirs_0"
    theirs.write_bytes(b"\0")
    os.chown(theirs, 65534, 65534)
    assert orphans({}) == []


def test_the_record_keeps_the_segments_seen_and_the_next_run_removes_the_free_ones(
    shm_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a backend's watches found is in the study's file while their jobs run; at
    the next `begin` of the study, the files listed that are still the same (inode) and
    that nobody holds are removed; one held stays listed; a line that is not an MPICH
    segment is ignored. A record whose jobs all ended leaves no file."""
    record = SegmentRecord()
    free, held_, replaced = (shm_dir / f"mpich_shm_{n}_0" for n in ("free", "held", "repl"))
    for path in (free, held_, replaced):
        path.write_bytes(b"\0")
    segments = [Segment(str(p), _dev(p), p.stat().st_ino) for p in (free, held_, replaced)]
    watch = SegmentWatch(record=record)
    watch.segments = [Segment(f"{shm_dir}/mpich_shm_gone_0", (0, 0), 1)]
    watch.remove("sim-0")  # (inactive before `begin`: nothing written)
    assert list(shm_dir.glob("melissa_trainer_*")) == []
    record.begin("abcd1234")
    path = Path(record.path or "")
    assert path.parent == shm_dir and not path.exists()  # (nothing recorded yet)
    record.update(add=segments)
    assert [line.split()[0] for line in path.read_text().splitlines()] == [
        str(p) for p in (free, held_, replaced)
    ]
    with path.open("a") as file:
        file.write(f"{shm_dir}/not_mpich 0:0 1\ngarbage\n")
    (shm_dir / "new").write_bytes(b"\0")
    (shm_dir / "new").rename(replaced)  # (another file under a recorded name)
    fd = os.open(held_, os.O_RDONLY)  # (a rank still alive)
    try:
        with caplog.at_level(logging.WARNING, logger=mpich_segments.__name__):
            assert SegmentRecord().begin("abcd1234") == [str(free)]  # the next run
        # a warning (shown on the console by default: a crash left them), said once
        said = [r for r in caplog.records if "removed 1 MPI shared-memory" in r.getMessage()]
        assert [r.levelno for r in said] == [logging.WARNING], caplog.text
        assert not free.exists() and held_.exists() and replaced.exists()
        assert [line.split()[0] for line in path.read_text().splitlines()] == [str(held_)]
    finally:
        os.close(fd)
    again = SegmentRecord()
    assert again.begin("abcd1234") == [str(held_)]
    assert not path.exists()  # (nothing left to record)
    again.update(add=segments[2:])
    assert path.exists()
    again.update(remove=segments[2:])
    assert not path.exists()


def test_the_next_run_sweeps_since_a_launch_that_no_look_followed(shm_dir: Path) -> None:
    """A job killed with its trainer (SIGKILL: the record is left as it is) before its
    first look has no segment listed, but its launch is, written before the job
    started. The next `begin` of the study removes the MPICH files of ours modified since
    then that nobody holds: not one held open (a live job's), not an older one, not
    another user's. A launch whose job ended, or whose segments were found, is dropped.
    (Before the launches were recorded, the file made after the launch stayed.)"""
    record = SegmentRecord()
    record.begin("abcd1234")
    path = Path(record.path or "")
    watch = SegmentWatch(record=record, launch=record.launching())
    assert path.read_text().startswith("launch 1 ")
    watch.remove("sim-0")  # (ended: no launch left, no file)
    assert not path.exists()
    old = shm_dir / "mpich_shm_old_0"
    old.write_bytes(b"\0")
    os.utime(old, (time.time() - 3600,) * 2)  # (a file made before the launch)
    record.launching()  # (the trainer is SIGKILLed during this job's first 0.5 s)
    free, held_, theirs = (shm_dir / f"mpich_shm_{n}_0" for n in ("free", "held", "theirs"))
    for file in (free, held_, theirs):
        file.write_bytes(b"\0")
    if os.geteuid() == 0:
        os.chown(theirs, 65534, 65534)
    mine = [theirs] if os.geteuid() != 0 else []  # (ours, free: swept too)
    assert {line.split()[0] for line in path.read_text().splitlines()} == {"launch"}
    fd = os.open(held_, os.O_RDONLY)  # (a rank of a live job)
    try:
        assert sorted(SegmentRecord().begin("abcd1234")) == sorted(map(str, [free, *mine]))
        assert old.exists() and held_.exists() and theirs.exists() == (not mine)
    finally:
        os.close(fd)
    assert not path.exists()  # (the launches are the killed run's: none left)
    again = SegmentRecord()
    again.begin("abcd1234")
    seen = SegmentWatch(record=again, launch=again.launching())
    with held_.open("rb"):  # (a rank of the job, at its first look)
        seen.add([os.getpid()])
    assert path.read_text().splitlines() == [f"{held_} {_dev(held_)[0]}:{_dev(held_)[1]} "
                                             f"{held_.stat().st_ino}"]  # fmt: skip
    assert seen.remove("sim-1") == [str(held_)] and not path.exists()


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_a_process_that_ended_is_dying_and_a_running_one_is_not() -> None:
    """`dying`: a zombie (ended, not reaped) or a process gone will hold nothing."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert not dying(os.getpid())
        wait_until(lambda: dying(child.pid), "the child's end (a zombie until reaped)", 30)
        assert Path(f"/proc/{child.pid}").exists()  # (not reaped yet: a zombie)
    finally:
        child.wait()
    assert dying(child.pid)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc (Linux)")
def test_a_process_ending_while_holders_reads_it_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process listed in /proc that ends before its fd folder or maps are read makes the
    read raise ESRCH (ProcessLookupError), not ENOENT: `holders` skips it and still finds
    the file mapped by this one (CI, stop 74: the session's shm guard died on the maps read).
    The ending is injected for a live pid (the parent's): a real one is a race of
    microseconds."""
    path = tmp_path / "mapped"
    path.write_bytes(b"\0" * mmap.PAGESIZE)
    with path.open("r+b") as file:
        mapping = mmap.mmap(file.fileno(), mmap.PAGESIZE)  # (closed, still mapped: maps only)
    other = os.getppid()
    real_open, real_listdir = open, os.listdir

    def ended_open(name: str, *args: object, **kwargs: object) -> object:
        if name == f"/proc/{other}/maps":
            raise ProcessLookupError(3, "No such process")
        return real_open(name, *args, **kwargs)  # type: ignore[call-overload]

    def ended_listdir(name: str) -> list[str]:
        if name == f"/proc/{other}/fd":
            raise ProcessLookupError(3, "No such process")
        return real_listdir(name)

    monkeypatch.setattr(file_holders, "open", ended_open, raising=False)
    monkeypatch.setattr(file_holders.os, "listdir", ended_listdir)
    try:
        assert holders([str(path)]) == {str(path): {os.getpid()}}
    finally:
        monkeypatch.undo()
        mapping.close()


def _dev(path: Path) -> tuple[int, int]:
    st_dev = path.stat().st_dev
    return (os.major(st_dev), os.minor(st_dev))


# -- real jobs -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["segv", "abort", "exit"])
@mpi_test
def test_an_mpiexec_job_failing_before_any_look_leaves_no_segment(
    tmp_path: Path, leftovers: set[Path], mode: str
) -> None:
    """2 ranks fail right after MPI_Init; hydra ends the job; the backend, which never
    looked at it while it ran, sees the end: the job's file is gone."""
    backend = MpiexecBackend(MPIEXEC or "mpiexec")
    here = tmp_path / "job"
    handle = backend.launch(
        Job("sim-0", rank_command(here, mode), log_path=tmp_path / "log", ranks=2)
    )
    try:
        files = reported(here, 2)
        leftovers.update(files)
        (here / "go").touch()
        handle.process.process.wait(timeout=60)  # type: ignore[attr-defined]  # (no poll)
        assert backend.poll(handle) not in (None, 0)
    finally:
        backend.close()
    assert [f for f in files if f.exists()] == [], f"left by the job ({mode}): {files}"


@mpi_test
def test_a_running_jobs_segment_is_not_swept(tmp_path: Path, leftovers: set[Path]) -> None:
    """Job A runs while job B, launched before it, fails before any look: B's end sweeps
    B's file, and not A's, made since B's launch but held by A's ranks."""
    backend = MpiexecBackend(MPIEXEC or "mpiexec")
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    b = backend.launch(
        Job("sim-b", rank_command(b_dir, "segv"), log_path=tmp_path / "b.log", ranks=2)
    )
    try:
        b_files = reported(b_dir, 2)
        leftovers.update(b_files)
        a = backend.launch(
            Job("sim-a", rank_command(a_dir, "wait"), log_path=tmp_path / "a.log", ranks=2)
        )
        a_files = reported(a_dir, 2)
        leftovers.update(a_files)
        (b_dir / "go").touch()
        b.process.process.wait(timeout=60)  # type: ignore[attr-defined]  # (no poll)
        assert backend.poll(b) not in (None, 0)
        assert [f for f in b_files if f.exists()] == [], f"left by the crashed job: {b_files}"
        assert all(f.exists() for f in a_files), f"a running job's file was removed: {a_files}"
        assert backend.poll(a) is None
    finally:
        backend.close()
    assert [f for f in a_files if f.exists()] == [], f"left by the killed job: {a_files}"


@needs_shm
@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_an_mpi_singleton_failing_before_any_look_leaves_no_segment(
    tmp_path: Path, leftovers: set[Path]
) -> None:
    """A Python solver with mpi4py run by the local backend (an MPI singleton, its file
    named after its pid) crashes right after MPI_Init: its file is gone."""
    pytest.importorskip("mpi4py")
    backend = LocalBackend()
    here = tmp_path / "job"
    handle = backend.launch(Job("sim-0", rank_command(here, "segv"), log_path=tmp_path / "log"))
    try:
        files = reported(here, 1)
        leftovers.update(files)
        assert {f.name for f in files} == {f"mpich_shm_{handle.pid:x}_0"}
        (here / "go").touch()
        handle.process.wait(timeout=60)  # (no poll)
        assert backend.poll(handle) == -11
    finally:
        backend.close()
    assert [f for f in files if f.exists()] == [], f"left by the singleton: {files}"
