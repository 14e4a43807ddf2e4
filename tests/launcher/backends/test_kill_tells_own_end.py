"""`Backend.kill` says whether the job had ended on its own: its exit code then (as
`poll` gives it), None when the kill ended it. The stop records a simulation by it
(`Supervisor.shutdown`: test_stop_kill_finds_exited.py); here each backend's answer.

A job "ended since the last poll" is one whose end nobody has reaped yet: the test
waits for it with ``waitid(WNOWAIT)``, which leaves it to the backend's kill."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from slurm_jobs import finish
from test_slurm_stand_ins import fake_slurm  # noqa: F401 (a fixture, found by name)
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, LocalBackend, SlurmBackend
from melissa_trainer.launcher.backends.slurm import script as ss
from melissa_trainer.launcher.backends.slurm.exit_code import CANCELLED_CODE

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="waitid, /proc"),
    pytest.mark.e2e,  # (every test starts processes)
]

PYTHON = sys.executable

#: a job that answers SIGTERM with its own exit code (argv[1]), once its handler is set
#: (argv[2] created)
ON_TERM = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(int(sys.argv[1])))
pathlib.Path(sys.argv[2]).touch()
time.sleep(60)
"""


#: seconds a job given SIGTERM has to end before its SIGKILL, where the test needs the
#: SIGTERM's end: its wait ends at the job's exit, so a long one costs nothing
GRACE = 100.0


def ended_unreaped(pid: int) -> int:
    """Wait for child `pid` to end, leaving it unreaped: its exit status."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    assert info is not None
    return info.si_status


@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", [0, 3])
def test_local_kill_of_a_job_that_ended_since_the_last_poll_gives_its_code(code: int) -> None:
    backend = LocalBackend()
    try:
        handle = backend.launch(Job("sim-0", [PYTHON, "-c", f"raise SystemExit({code})"]))
        assert ended_unreaped(handle.pid) == code
        assert backend.kill(handle, grace=1) == code  # no signal: it had ended
        assert backend.kill(handle, grace=1) == code  # (again: the same)
        assert backend.poll(handle) == code
    finally:
        backend.close()


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("on_term", "told"), [(0, None), (5, None)])
def test_local_kill_after_the_signal_counts_any_end_as_the_kills(
    tmp_path: Path, on_term: int, told: int | None
) -> None:
    """After its SIGTERM, a job's end is the kill's, exit 0 included (a solver that
    catches SIGTERM and exits 0 has not finished its simulation); a job killed by the
    signal: None too."""
    backend = LocalBackend()
    ready = tmp_path / "ready"
    try:
        handle = backend.launch(Job("sim-1", [PYTHON, "-c", ON_TERM, str(on_term), str(ready)]))
        wait_until(ready.exists, "its SIGTERM handler", 30)
        # (a grace far beyond the handler's exit, which the kill waits out only if the
        # job has not ended: the job runs at nice 10, and a loaded run of this file with
        # a grace of 10 s saw it SIGKILLed, -9, before its handler's exit ran)
        assert backend.kill(handle, grace=GRACE) == told
        assert backend.poll(handle) == on_term  # (poll still gives what it exited with)
        assert backend.kill(handle, grace=1) == told  # (again: the same)
        plain = backend.launch(Job("sim-2", [PYTHON, "-c", "import time; time.sleep(60)"]))
        assert backend.kill(plain, grace=GRACE) is None
        assert backend.poll(plain) == -signal.SIGTERM
    finally:
        backend.close()


@pytest.mark.timeout(30)
def test_batch_kill_tells_a_job_that_ended_from_one_it_ended(
    fake_slurm: Path,  # noqa: F811 (the imported fixture)
    tmp_path: Path,
) -> None:
    """A batch job squeue lists ended at the kill: its code, nothing cancelled. One
    listed running whose script has written 0 by the time the kill reads its end (it
    exited 0 just before the scancel, or on its SIGTERM: the backend cannot tell): None,
    as one killed (no exit file; cancelled)."""
    backend = SlurmBackend(script_dir=tmp_path, poll_every=0)
    try:
        (fake_slurm / "state").write_text("4242|RUNNING\n")
        ended = backend.launch(Job("sim-1", ["/bin/true"], cwd=tmp_path))
        assert backend.poll(ended) is None
        (tmp_path / ss.exit_file("sim-1", "4242")).write_text("3\n")
        (fake_slurm / "state").write_text("4242|FAILED\n")
        assert backend.kill(ended, grace=1) == 3
        assert not (fake_slurm / "scancel.calls").exists()

        (fake_slurm / "state").write_text("4242|RUNNING\n")
        window = backend.launch(Job("sim-2", ["/bin/true"], cwd=tmp_path))
        assert backend.poll(window) is None
        (tmp_path / ss.exit_file("sim-2", "4242")).write_text("0\n")  # squeue: still RUNNING
        assert backend.kill(window, grace=1) is None
        assert (fake_slurm / "scancel.calls").read_text().splitlines() == [
            "--full --signal=TERM 4242"
        ]

        (fake_slurm / "state").write_text("4242|RUNNING\n")
        killed = backend.launch(Job("sim-3", ["/bin/sleep", "100"], cwd=tmp_path))
        assert backend.poll(killed) is None
        assert backend.kill(killed, grace=1) is None
        # (CANCELLED, no exit file, seen running: a cancellation's 143, `exit_code.CANCELLED_CODE`,
        # as a scancel before the script ran: 8422a4a7)
        assert backend.poll(killed) == CANCELLED_CODE
    finally:
        backend.close()


@pytest.mark.timeout(60)
def test_srun_kill_gives_the_code_of_a_step_that_ended_and_none_after_its_signal(
    fake_slurm: Path,  # noqa: F811 (the imported fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step whose srun ended since the last poll: its code. One the kill signalled:
    None, even when srun then exits 0 (srun's 0 after a kill is no news of the job)."""
    monkeypatch.setenv("SLURM_JOB_ID", "99")
    backend = SlurmBackend(mode="srun")
    ready = tmp_path / "ready"
    try:
        ended = backend.launch(Job("sim-1", [PYTHON, "-c", "raise SystemExit(3)"]))
        assert ended_unreaped(ended.process.pid) == 3
        assert backend.kill(ended, grace=1) == 3
        assert finish(backend, ended) == 3
        handle = backend.launch(Job("sim-2", [PYTHON, "-c", ON_TERM, "0", str(ready)]))
        wait_until(ready.exists, "its SIGTERM handler", 30)
        assert backend.kill(handle, grace=5) is None
        assert backend.poll(handle) == 128 + signal.SIGKILL
    finally:
        backend.close()
