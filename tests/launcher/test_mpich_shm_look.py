"""A look that finds none of a job's files no longer hides them from its sweep.

A look (`SegmentWatch.look`) that finds none of a job's files takes the files that
exist for others' and narrows the job's sweep to files made later. Two ways it took the
job's own file so, and the failed job left it:

* The job's ranks had all died before the look (a rank killed, hydra ending the others)
  while mpiexec was still running: nobody held the file. Seen: the C solver of
  tests/examples/test_c_examples.py, whose rank 0 SIGKILLs itself about when the first
  look comes, left its file in 1 run in 2 to 10. Now a file that nobody holds stays a
  candidate of the sweep; one that a live process holds is still left.
* `MpiexecBackend` read /proc (its process table, shared by the jobs that look in one
  poll) before listing /dev/shm: ranks that hydra started between the two made their
  file in that gap, and the look read none of their processes (a race of the same
  look, found by reading it). Now the files are listed before the scan.

Both tests failed before (the job's file was left). The jobs are stand-ins, without
MPI: "mpiexec" is a script that waits for a gate file, runs the command as its child
(as hydra's proxy runs a rank), then waits for a second gate file before it exits with
the child's status; the rank makes an MPICH-named file, holds it open (as MPICH's ranks
do until they exit), says so, and fails (exit 1, the file left) when told to.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, MpiexecBackend, mpich_segments
from melissa_trainer.launcher.backends import mpiexec as mpiexec_module
from melissa_trainer.launcher.backends.mpiexec import MpiexecHandle

#: mpiexec -n 1 GATE AFTER ARGV: waits for the file GATE, runs ARGV as its child, waits
#: for the file AFTER, exits with ARGV's status
MPIEXEC = """#!/bin/sh
shift 2
gate=$1
after=$2
shift 2
while [ ! -e "$gate" ]; do sleep 0.01; done
"$@"
code=$?
while [ ! -e "$after" ]; do sleep 0.01; done
exit $code
"""

#: a rank: makes shm/mpich_shm_NAME_0 and holds it open, writes its pid to here/NAME.ready,
#: exits 1 once here/NAME.end exists (no MPI_Finalize: the file stays)
RANK = """
import os, sys, time
from pathlib import Path

shm, here, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
path = shm / f"mpich_shm_{name}_0"
path.write_bytes(b"\\0" * 4096)
held = open(path, "rb")
(here / f"{name}.tmp").write_text(str(os.getpid()))
(here / f"{name}.tmp").rename(here / f"{name}.ready")
deadline = time.monotonic() + 120
while not (here / f"{name}.end").exists() and time.monotonic() < deadline:
    time.sleep(0.01)
os._exit(1)
"""


class Jobs:
    """Stand-in jobs (module docstring) of one backend, in tmp_path: segments in
    tmp_path/shm, the jobs' files in tmp_path/job; one look per job, at its first poll."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.shm, self.here, self.tmp = tmp_path / "shm", tmp_path / "job", tmp_path
        self.shm.mkdir()
        self.here.mkdir()
        monkeypatch.setattr(mpich_segments, "SHM_DIR", f"{self.shm}/")
        monkeypatch.setattr(mpich_segments, "LOOKS_AT", (0.0,))
        launcher = tmp_path / "mpiexec"
        launcher.write_text(MPIEXEC)
        launcher.chmod(0o755)
        (tmp_path / "rank.py").write_text(RANK)
        self.backend = MpiexecBackend(str(launcher), placement=None)

    def launch(self, name: str) -> MpiexecHandle:
        """Job `name`, waiting for its gate (`open`) and, once its rank ended, for
        `after`."""
        gates = [str(self.here / f"{name}.gate"), str(self.here / f"{name}.after")]
        argv = [*gates, sys.executable, str(self.tmp / "rank.py")]
        argv += [str(self.shm), str(self.here), name]
        job = Job(f"sim-{name}", argv, log_path=self.tmp / f"{name}.log")
        handle = self.backend.launch(job)
        assert isinstance(handle, MpiexecHandle)
        return handle

    def open(self, handle: MpiexecHandle, name: str) -> int:
        """Let job `name`'s rank start; once it holds its file, its pid."""
        (self.here / f"{name}.gate").touch()
        ready = self.here / f"{name}.ready"
        wait_until(ready.exists, f"job {name}'s rank", procs=[handle.process.process])
        return int(ready.read_text())

    def file(self, name: str) -> Path:
        return self.shm / f"mpich_shm_{name}_0"


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_file_made_by_ranks_the_looks_scan_missed_is_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Job a's look reads /proc while job b's rank has not started; b's rank then makes
    its file, and b's look (same scan) finds nothing. When b fails, its file is removed;
    a's, held by a's running rank, is kept until a is killed."""
    jobs = Jobs(tmp_path, monkeypatch)
    # (the scan serves every look below: the two looks of one tick, made deterministic)
    monkeypatch.setattr(mpiexec_module, "TABLE_REUSE", 3600.0)
    backend = jobs.backend
    try:
        a, b = jobs.launch("a"), jobs.launch("b")
        for name in "ab":
            (jobs.here / f"{name}.after").touch()
        jobs.open(a, "a")
        assert backend.poll(a) is None  # a's look: /proc read now, b's rank not started
        assert [s.path for s in a.shm.segments] == [str(jobs.file("a"))]
        jobs.open(b, "b")
        assert backend.poll(b) is None  # b's look: the same scan, without b's rank
        assert b.shm.segments == []
        (jobs.here / "b.end").touch()
        wait_until(lambda: backend.poll(b) is not None, "job b's end")
        assert b.process.process.returncode == 1
        assert not jobs.file("b").exists(), "the failed job b left its file"
        assert jobs.file("a").exists(), "the sweep removed running job a's file"
    finally:
        backend.close()
    assert not jobs.file("a").exists(), "the killed job a left its file"


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_a_file_whose_ranks_died_before_the_look_is_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Job c's rank has made its file and died before the look; mpiexec still runs. The
    look finds nothing, and nobody holds the file: the sweep at c's end removes it. A
    file made meanwhile that a live process held at the look (another job's) is left,
    even once free: the narrowing that a look which finds nothing still does."""
    jobs = Jobs(tmp_path, monkeypatch)
    backend = jobs.backend
    try:
        c = jobs.launch("c")
        rank = jobs.open(c, "c")
        (jobs.here / "c.end").touch()
        wait_until(lambda: _gone(rank), "job c's rank's end")
        other = jobs.shm / "mpich_shm_other_0"
        other.write_bytes(b"\0" * 4096)
        held = os.open(other, os.O_RDONLY)  # (this process: another job's live rank)
        try:
            assert backend.poll(c) is None  # c's look: mpiexec runs, its rank is gone
        finally:
            os.close(held)
        assert c.shm.segments == []
        (jobs.here / "c.after").touch()
        wait_until(lambda: backend.poll(c) is not None, "job c's end")
        assert c.process.process.returncode == 1
        assert not jobs.file("c").exists(), "the failed job c left its file"
        assert other.exists(), "the sweep removed a file held at the look"
    finally:
        backend.close()
