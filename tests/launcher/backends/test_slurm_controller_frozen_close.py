"""A close while the real Slurm controller is frozen (tests/slurm_cluster.py, slurmctld
SIGSTOPped): the doc's promise (docs/how-to/slurm.md, "A controller restart") that
"the scancels of one kill, of a close or of a study's start share one
`controller_wait`", so that an outage holds a trainer's close about `controller_wait`
seconds in all, checked against a real controller rather than the stand-ins of
test_slurm_controller_outage.py.

Against a frozen controller every Slurm command takes MessageTimeout (10 s on the test
cluster) to fail, squeue included: the close must not spend that on each of its
scancels and squeues once the shared wait is over. A scancel that gave up on its reply
was not processed when the controller resumed (seen here: the jobs still ran minutes
later): the jobs are ended by their lease, which the close stopped renewing. A second
close while it is still frozen writes no second close line in a job's log."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, queue
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: the test cluster's MessageTimeout (Slurm's default): how long one command waits for
#: a frozen controller's reply
MESSAGE_TIMEOUT = 10.0
WAIT = 5.0  # controller_wait
LEASE = 10.0  # lease_timeout


@pytest.mark.timeout(300)
def test_a_close_during_a_frozen_controller_is_held_about_controller_wait(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = SlurmBackend(
        poll_every=POLL, script_dir=tmp_path / "scripts", controller_wait=WAIT, lease_timeout=LEASE
    )
    backend.begin_study("frozenclose")
    logs = [tmp_path / f"sim-{i}.log" for i in range(2)]
    handles = [
        backend.launch(Job(f"sim-{i}", ["sleep", "600"], cwd=tmp_path, log_path=logs[i]))
        for i in range(2)
    ]
    try:
        wait_until(
            lambda: all(backend.poll(h) is None and backend.started(h) for h in handles),
            what="both jobs running",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        sent: list[list[str]] = []  # (each command the close sends the frozen controller)
        run = SlurmCommands.run

        def counted(self: SlurmCommands, argv: list[str], *args: object, **kw: object) -> object:
            sent.append(argv)
            return run(self, argv, *args, **kw)  # type: ignore[arg-type]

        with slurm_cluster.controller_paused():
            monkeypatch.setattr(SlurmCommands, "run", counted)
            started = time.monotonic()
            backend.close()
            held = time.monotonic() - started
            monkeypatch.undo()
            backend.close()  # (again, the controller still frozen: no second line)
        # the close's first squeue and one scancel's first try each wait out
        # MessageTimeout (longer than the shared WAIT); then the wait is spent, and
        # nothing more is asked of a controller that did not answer (failed before: 6
        # commands, 80 s, every later scancel and squeue of the close waiting out its
        # own MessageTimeout). Counted, not timed: a loaded machine slows each command
        names = [Path(argv[0]).name for argv in sent]
        assert len(sent) <= 2, f"{names} sent in {held:.1f} s"
        for log in logs:  # the close's line once in each log (failed before: twice)
            said = [line for line in log.read_text().splitlines() if "killing this job" in line]
            assert len(said) == 1, log.read_text()
        # the lease the close stopped renewing ends the jobs once the controller is back
        wait_until(
            lambda: "mt-" not in queue(),
            what=lambda: f"the jobs to end by their lease: {queue()}",
            timeout=UNTIL_TEST_TIMEOUT,
        )
    finally:
        with contextlib.suppress(AssertionError):
            slurm_cluster.run("scancel", "--full", "--signal=KILL", "-u", "root")
        wait_until(lambda: "mt-" not in queue(), what="no job left", timeout=60)
