"""A study that ends normally (the launcher's stop: the study's end, the trainer's
SIGTERM) leaves no `SegmentRecord` in /dev/shm: the record is for the next run after a
trainer killed with SIGKILL, which nothing else would clean up after.

Found on the test machine (2026-12-02): ``melissa_trainer_<study>_0.segments`` holding
one ``launch`` line was left by tests/launcher/test_mpiexec_killed_rank.py, whose study
ended normally. Its job (no MPI) had ended with a sweep that found a file of another
test's live MPI job, made since the launch (`SegmentWatch.pending`); `close` waited
for its holder, then dropped the job without dropping its launch from the record.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from mpich_shm import MPIEXEC, SHM, mpi_test

from melissa_trainer.launcher.backends import Job, MpiexecBackend

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
