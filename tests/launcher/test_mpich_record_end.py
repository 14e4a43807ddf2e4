"""A study that ends normally (the launcher's stop: the study's end, the trainer's
SIGTERM) leaves no `SegmentRecord` in /dev/shm: the record is for the next run after a
trainer killed with SIGKILL, which nothing else would clean up after.

Found on the test machine (2026-12-02): ``melissa_trainer_<study>_0.segments`` holding
one ``launch`` line was left by tests/launcher/test_mpiexec_killed_rank.py, whose study
ended normally. Its job (no MPI) had ended with a sweep that found a file of another
test's live MPI job, made since the launch (`SegmentWatch.pending`); `close` waited
for its holder, then dropped the job without dropping its launch from the record.

Then the most likely holder at close, after a job's ranks ended, was found left out: a
process of that same job left behind (an orphaned rank, a rank's child). Dropped so,
its file was never removed: nothing would sweep that launch again. Now each job's
environment carries its own mark (`mpiexec.JOB_MARK`, passed on by hydra to the ranks),
and at the last retry a file held only by marked processes is unlinked.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
from mpich_shm import MPIEXEC, SHM, mpi_test
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, MpiexecBackend, mpich_segments, mpiexec

#: a rank with no MPI: ends once the file argv[1] exists
RANK = """
import sys, time
from pathlib import Path
while not Path(sys.argv[1]).exists():
    time.sleep(0.05)
"""


@mpi_test
def test_a_closed_backend_leaves_no_record_for_a_file_another_job_holds(tmp_path: Path) -> None:
    """A job ends; its sweep finds a file of ours made since its launch that a live
    process (here this test) holds: another job's, kept pending. The backend's close
    leaves it, and drops the job's launch: no record is left. (Before, the record stayed,
    its ``launch`` line telling the study's next run to sweep: a test's study never runs
    again.)"""
    study = f"t{uuid.uuid4().hex[:7]}"
    record = SHM / f"melissa_trainer_{study}_{os.geteuid()}.segments"
    other = SHM / f"mpich_shm_test{uuid.uuid4().hex}_0"  # (a name no MPICH job makes)
    (tmp_path / "rank.py").write_text(RANK)
    argv = [sys.executable, str(tmp_path / "rank.py"), str(tmp_path / "go")]
    backend = MpiexecBackend(MPIEXEC or "mpiexec")
    try:
        backend.begin_study(study)
        handle = backend.launch(Job("sim-0", argv, log_path=tmp_path / "log", ranks=1))
        with other.open("wb") as held:  # made after the launch, held while the job ends
            held.write(b"\0")
            (tmp_path / "go").touch()
            # waited for without a poll: a poll's look would take the held file for
            # another job's before the end (`SegmentWatch.look`), and nothing be pending
            pid = handle.process.pid  # type: ignore[attr-defined]
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            assert backend.poll(handle) == 0
            assert handle.shm.pending, "the sweep did not find the held file"  # type: ignore[attr-defined]
            assert record.read_text().startswith("launch "), "the launch is not recorded"
            backend.close()
        assert other.exists(), "another job's file was removed"
        assert not record.exists(), f"left by a backend closed normally: {record.read_text()}"
    finally:
        backend.close()
        other.unlink(missing_ok=True)
        record.unlink(missing_ok=True)


#: the job left behind (stand-in, no MPI): makes an MPICH-named file, starts a process
#: in a session of its own (as hydra starts the ranks) that holds it until the file
#: argv[2]/go exists, waits until it does, then fails without removing the file
ORPHANING = """
import subprocess, sys, time
from pathlib import Path

shm, here = Path(sys.argv[1]), Path(sys.argv[2])
(shm / "mpich_shm_job_0").write_bytes(b"\\0" * 4096)
HOLDER = (
    "import sys, time; from pathlib import Path; here = Path(sys.argv[2]); "
    "f = open(Path(sys.argv[1]) / 'mpich_shm_job_0', 'rb'); (here / 'held').touch(); "
    "deadline = time.monotonic() + 120\\n"
    "while not (here / 'go').exists() and time.monotonic() < deadline: time.sleep(0.01)\\n"
    "f.seek(0); sys.exit(0 if f.read() == bytes(4096) else 3)"
)
argv = [sys.executable, "-c", HOLDER, str(shm), str(here)]
holder = subprocess.Popen(argv, start_new_session=True)
(here / "holder").write_text(str(holder.pid))
deadline = time.monotonic() + 120
while not (here / "held").exists() and time.monotonic() < deadline:
    time.sleep(0.01)
sys.exit(1)
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc (Linux)")
def test_close_removes_a_file_that_only_the_jobs_own_left_behind_process_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job ends, leaving a process of its own (a rank in a session of its own, which
    hydra did not end) that holds the job's file. At close it is still alive: the file
    is the job's, and nobody else can use it: unlinked, its holder still reading it; no
    record left. (Before, the file was left as another job's, and the launch dropped
    from the record: nothing would ever remove it.)"""
    shm, here = tmp_path / "shm", tmp_path / "job"
    shm.mkdir()
    here.mkdir()
    monkeypatch.setattr(mpich_segments, "SHM_DIR", f"{shm}/")
    monkeypatch.setattr(mpich_segments, "RETRY_AFTER", (3600.0,) * 5)  # (only close's)
    monkeypatch.setattr(mpiexec, "CLOSE_WAIT", 0.0)  # (its holder does not end)
    launcher = tmp_path / "mpiexec"
    launcher.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')  # (``mpiexec -n 1 ARGV``)
    launcher.chmod(0o755)
    (tmp_path / "job.py").write_text(ORPHANING)
    study = f"t{uuid.uuid4().hex[:7]}"
    record = shm / f"melissa_trainer_{study}_{os.geteuid()}.segments"
    file, holder = shm / "mpich_shm_job_0", None
    backend = MpiexecBackend(str(launcher))
    try:
        backend.begin_study(study)
        argv = [sys.executable, str(tmp_path / "job.py"), str(shm), str(here)]
        handle = backend.launch(Job("sim-0", argv, log_path=tmp_path / "log"))
        handle.process.process.wait(timeout=60)  # type: ignore[attr-defined]  # (no look)
        holder = int((here / "holder").read_text())
        assert backend.poll(handle) == 1
        assert handle.shm.pending, "the sweep did not find the held file"  # type: ignore[attr-defined]
        backend.close()
        assert os.path.exists(f"/proc/{holder}"), "the holder ended: nothing tested"
        assert not file.exists(), "the file that only the job's own process held was left"
        assert not record.exists(), f"left by a backend closed normally: {record.read_text()}"
        (here / "go").touch()
        wait_until(lambda: _reaped(holder), "the holder's end", 60)
    finally:
        (here / "go").touch()
        backend.close()
        if holder is not None and os.path.exists(f"/proc/{holder}"):
            os.kill(holder, 9)


def _reaped(pid: int) -> bool:
    """Process `pid` (not our child: init reaps it) has ended."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


@mpi_test
def test_hydra_passes_the_jobs_mark_to_its_ranks(tmp_path: Path) -> None:
    """The mark that tells the job's processes from others' (`mpiexec.JOB_MARK`) is in
    the environment of its ranks under the real mpiexec, not only of mpiexec."""
    rank = "import os, sys; open(sys.argv[1], 'w').write(os.environ.get(sys.argv[2], '?'))"
    argv = [sys.executable, "-c", rank, str(tmp_path / "mark"), mpiexec.JOB_MARK]
    backend = MpiexecBackend(MPIEXEC or "mpiexec")
    try:
        handle = backend.launch(Job("sim-0", argv, log_path=tmp_path / "log", ranks=2))
        wait_until(lambda: backend.poll(handle) is not None, "the job's end", 60)
        assert backend.poll(handle) == 0, (tmp_path / "log").read_text()
        mark = (tmp_path / "mark").read_text()
        assert f"{mpiexec.JOB_MARK}={mark}" == handle.shm.mark  # type: ignore[attr-defined]
    finally:
        backend.close()
