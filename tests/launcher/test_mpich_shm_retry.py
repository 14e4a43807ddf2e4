"""A sweep that finds the job's file still held retries it (`SegmentWatch.retry`).

Hydra's mpiexec can end before the ranks it SIGKILLs (``MPI_Abort``: hydra's proxies
kill the ranks as mpiexec ends), and a loaded machine takes seconds to end a SIGKILLed
rank: the sweep at the job's end (`mpich_segments.sweep`) then found the file held,
left it, and nobody looked again. The file stayed (the suite left such files, held
by nobody, on a loaded CI machine; tests/launcher/test_mpich_shm_sweep.py's MPI_Abort
case failed once so). Now the backend looks again at later polls and at `close`; a file
still held is never removed.

The job here is a stand-in, without MPI: "mpiexec" is a script that runs the command,
which makes an MPICH-named file and leaves a process of its own session holding it
(a rank that outlives its mpiexec) until told to end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from melissa_trainer.launcher.backends import Handle, Job, MpiexecBackend, mpich_segments

#: the job: makes the file, starts its holder in a session of its own, waits until the
#: holder has it open, then fails (exit 1) without removing it
JOB = """
import subprocess, sys, time
from pathlib import Path

shm, here = Path(sys.argv[1]), Path(sys.argv[2])
(shm / "mpich_shm_job_0").write_bytes(b"\\0" * 4096)
HOLDER = (
    "import os, sys, time; from pathlib import Path; here = Path(sys.argv[2]); "
    "f = open(Path(sys.argv[1]) / 'mpich_shm_job_0', 'rb'); "
    "(here / 'held.tmp').write_text(str(os.getpid())); (here / 'held.tmp').rename(here / 'held'); "
    "deadline = time.monotonic() + 120\\n"
    "while not (here / 'go').exists() and time.monotonic() < deadline: time.sleep(0.01)"
)
subprocess.Popen([sys.executable, "-c", HOLDER, str(shm), str(here)], start_new_session=True)
deadline = time.monotonic() + 120
while not (here / "held").exists() and time.monotonic() < deadline:
    time.sleep(0.01)
sys.exit(1)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MpiexecBackend, Handle]:
    """A backend whose segments are in tmp_path/shm, and its job (`JOB`) in tmp_path/job
    under a stand-in mpiexec (a script: ``mpiexec -n 1 ARGV`` runs ARGV)."""
    shm, here = tmp_path / "shm", tmp_path / "job"
    shm.mkdir()
    here.mkdir()
    monkeypatch.setattr(mpich_segments, "SHM_DIR", f"{shm}/")
    launcher = tmp_path / "mpiexec"
    launcher.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')
    launcher.chmod(0o755)
    (tmp_path / "job.py").write_text(JOB)
    backend = MpiexecBackend(str(launcher))
    argv = [sys.executable, str(tmp_path / "job.py"), str(shm), str(here)]
    return backend, backend.launch(Job("sim-0", argv, log_path=tmp_path / "log"))


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_file_still_held_at_the_jobs_end_is_removed_once_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the job's end its file is held by a live process: kept. Once that process
    has ended, the next poll's retry removes it (failed before: the file stayed)."""
    shm, here = tmp_path / "shm", tmp_path / "job"
    backend, handle = start(tmp_path, monkeypatch)
    monkeypatch.setattr(mpich_segments, "RETRY_AFTER", (0.0,) * 5)  # (every poll: no clock)
    file, holder = shm / "mpich_shm_job_0", None
    try:
        wait_until(lambda: (here / "held").exists(), "the holder's start", 60)
        holder = int((here / "held").read_text())
        handle.process.process.wait(timeout=60)  # type: ignore[attr-defined]  # (no look)
        assert backend.poll(handle) == 1
        assert file.exists()  # (held by a live process: maybe another job's)
        (here / "go").touch()
        wait_until(lambda: not _alive(holder), "the holder's end", 60)
        backend.poll(handle)  # (the launcher's next poll)
        assert not file.exists(), "the file its holder let go of was left"
    finally:
        (here / "go").touch()
        backend.close()
        if holder is not None and _alive(holder):
            os.kill(holder, 9)


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_close_retries_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`close` (the study's end) retries without waiting for the retry's time."""
    shm, here = tmp_path / "shm", tmp_path / "job"
    backend, handle = start(tmp_path, monkeypatch)
    monkeypatch.setattr(mpich_segments, "RETRY_AFTER", (3600.0,) * 5)  # (never due)
    file, holder = shm / "mpich_shm_job_0", None
    try:
        wait_until(lambda: (here / "held").exists(), "the holder's start", 60)
        holder = int((here / "held").read_text())
        handle.process.process.wait(timeout=60)  # type: ignore[attr-defined]  # (no look)
        assert backend.poll(handle) == 1
        (here / "go").touch()
        wait_until(lambda: not _alive(holder), "the holder's end", 60)
        backend.poll(handle)
        assert file.exists()  # (not due)
        backend.close()
        assert not file.exists(), "close left the file its holder let go of"
    finally:
        (here / "go").touch()
        backend.close()
        if holder is not None and _alive(holder):
            os.kill(holder, 9)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_retries_stop_after_the_last_and_never_remove_a_held_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file held all along (a live job's) is never removed: after `RETRY_AFTER`'s
    retries it is no longer pending. `close`'s retries (``now``) are not counted among
    them; a file let go of is removed at the next retry."""
    monkeypatch.setattr(mpich_segments, "SHM_DIR", f"{tmp_path}/")
    monkeypatch.setattr(mpich_segments, "RETRY_AFTER", (0.0,) * 3)
    watch = mpich_segments.SegmentWatch(mpich_segments.listing())
    held, freed = tmp_path / "mpich_shm_held_0", tmp_path / "mpich_shm_freed_0"
    for file in (held, freed):
        file.write_bytes(b"\0")
    fds = {file: os.open(file, os.O_RDONLY) for file in (held, freed)}
    try:
        assert watch.remove("sim-0") == [] and len(watch.pending) == 2
        for _ in range(5):
            assert not watch.retry("sim-0", now=True)  # (not counted)
        os.close(fds.pop(freed))
        assert not watch.retry("sim-0") and not freed.exists()  # (1st)
        assert not watch.retry("sim-0")  # (2nd)
        assert watch.retry("sim-0") and watch.pending == []  # (3rd, the last)
        assert held.exists()
    finally:
        for fd in fds.values():
            os.close(fd)


#: holds the files argv[1:] open until its stdin closes; says "held" once it does
HOLD = (
    "import sys; fs = [open(p, 'rb') for p in sys.argv[1:]]; "
    "print('held', flush=True); sys.stdin.read()"
)


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_the_last_retry_removes_only_what_the_jobs_own_processes_alone_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `RETRY_AFTER`'s retries, a file held only by processes carrying the job's
    mark (left behind by the ended job) is unlinked; one that another job's process
    (another mark, or none) holds, also or alone, is left."""
    monkeypatch.setattr(mpich_segments, "SHM_DIR", f"{tmp_path}/")
    monkeypatch.setattr(mpich_segments, "RETRY_AFTER", (0.0,) * 2)
    watch = mpich_segments.SegmentWatch(mpich_segments.listing(), mark="MT_TEST_JOB=ours")
    ours, shared, theirs = (tmp_path / f"mpich_shm_{n}_0" for n in ("ours", "shared", "theirs"))
    for file in (ours, shared, theirs):
        file.write_bytes(b"\0")
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", HOLD, *map(str, files)],
            env={**os.environ, "MT_TEST_JOB": mark},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for mark, files in (("ours", (ours, shared)), ("other", (shared, theirs)))
    ]
    try:
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert watch.remove("sim-0") == [] and len(watch.pending) == 3
        assert not watch.retry("sim-0")  # (1st: nothing removed)
        assert ours.exists()
        assert watch.retry("sim-0") and watch.pending == []  # (2nd, the last)
        assert not ours.exists(), "the file only the job's own process held was left"
        assert shared.exists() and theirs.exists(), "another job's file was removed"
    finally:
        for holder in holders:
            holder.communicate(timeout=30)
