"""Severity LOW. A new-user trial: a launcher whose solver script does not exist
(``Launcher([sys.executable, "solvr.py"], ...)``, a typo: the interpreter starts, then
exits 2 at once), ``n_simulations=8``, ``job_limit=2``, ``max_restarts=0``.

What happened: the study stopped (every first attempt failed alike), and its error said
"besides, 4 failed for good" and "5 simulations (0, 1, 2, 3, 4) failed alike", its
account "4 simulations ended": three counts, two numbers, no word of why. The fifth,
simulation 4, had exited too when the study failed; its attempt was recorded without a
failure policy (pending, not failed for good: `FailurePolicy.record_ended`), while the
report's kinds listed every simulation with a failed attempt.

What was expected: counts that agree, or words that say what each counts. The kind's
line now says what became of its simulations when not all of them failed for good
(`reports._fates`): "..., of them 4 failed for good (0, 1, 2, 3) and 1 pending (4), not
given up when the study stopped".

The run is real (the local backend, a missing script); only the timing the user met is
made certain: the backend holds the ends of simulations 3 and 4 until both processes
have exited, so that the launcher reads them in one poll, the first failing the study
and the other recorded as it stops.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from account_studies import failure

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.account import study_account
from melissa_trainer.launcher.backends.base import Handle
from melissa_trainer.launcher.backends.local import LocalBackend, LocalHandle

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")

#: the simulations whose ends are read together (`HeldBackend`)
TOGETHER = (3, 4)


class HeldBackend(LocalBackend):
    """The local backend, but the end of a simulation in `TOGETHER` is reported only
    once every one of them has exited (their processes' own exit, waited for here)."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[int, LocalHandle] = {}

    def launch(self, job):  # type: ignore[no-untyped-def]
        handle = super().launch(job)
        sid = int(job.env["MELISSA_TRAINER_SIMULATION_ID"])
        if sid in TOGETHER:
            self.held[sid] = handle
        return handle

    def poll(self, handle: Handle) -> int | None:
        sid = int(handle.job.env["MELISSA_TRAINER_SIMULATION_ID"])
        if sid in TOGETHER and (
            len(self.held) < len(TOGETHER)
            or any(h.process.poll() is None for h in self.held.values())
        ):
            return None
        return super().poll(handle)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_failed_alike_line_says_which_failed_for_good(tmp_path: Path) -> None:
    launch = Launcher(
        [sys.executable, str(tmp_path / "solvr.py")],  # (no such file: exit 2 at once)
        UniformSampler({"x": (0.0, 1.0)}, seed=0),
        8,
        job_limit=2,
        backend=HeldBackend(),
        log_dir=tmp_path / "logs",
        tuning=LauncherTuning(poll_interval=0.02, kill_grace=2.0, max_restarts=0),
    )
    launch.start(tmp_path / "rendezvous")
    try:
        lines = str(failure(launch, timeout=90)).splitlines()
        outcomes = launch.outcomes()
    finally:
        launch.stop()
    counts = next(line for line in lines if line.startswith("study of 8 simulations"))
    assert "; besides, 4 failed for good, each replaced by a new draw; 5 attempts" in counts
    (alike,) = [line for line in lines if "failed alike" in line]
    assert alike.startswith("  5 simulations (0, 1, 2, 3, 4) failed alike (exit codes [2], ")
    # which one is pending depends on which of 3 and 4 the launcher read first
    said = re.search(
        r", of them 4 failed for good \(([\d, ]+)\) and 1 pending \((\d)\), not given up "
        r"when the study stopped; last lines of ",
        alike,
    )
    assert said is not None, alike
    given_up, pending = [int(s) for s in said.group(1).split(", ")], int(said.group(2))
    assert sorted([*given_up, pending]) == [0, 1, 2, 3, 4] and pending in TOGETHER, alike
    account, _ = study_account(outcomes, {}, 8)
    assert account[0].startswith("study account: 4 simulations ended, 0 contributed"), account


def test_the_fates_are_said_only_when_not_all_failed_for_good(tmp_path: Path) -> None:
    """All given up: the line as before (the counts' "N failed for good" names them);
    restarts to come (max_restarts > 0): "none failed for good"; one that finished on a
    restart, and one running again, said so."""
    from melissa_trainer.launcher.reports import failure_report

    for sid in range(4):
        (tmp_path / f"sim-{sid}.log").write_text("solver diverged\n")
    failed = [(sid, f"simulation {sid}", (1,)) for sid in range(4)]

    def line(status: dict[int, str]) -> str:
        return failure_report(failed, lambda s: tmp_path / f"sim-{s}.log", tmp_path, status)[0]

    assert "their parameters differing; last lines of " in line(dict.fromkeys(range(4), "failed"))
    restarts = line(dict.fromkeys(range(4), "pending"))
    assert (
        "their parameters differing, of them none failed for good: 4 pending (0, 1, 2, 3), "
        "not given up when the study stopped; last lines of "
    ) in restarts, restarts
    mixed = line({0: "abandoned", 1: "finished", 2: "running", 3: "pending"})
    assert (
        ", of them 1 failed for good (0), 1 finished on a restart (1), 1 running again (2) and "
        "1 pending (3), not given up when the study stopped; last lines of "
    ) in mixed, mixed
