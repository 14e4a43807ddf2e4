"""A 2-rank job under MPICH's mpiexec (hydra) whose rank 1 SIGKILLs itself: hydra
exits with 9, the signal's number, which the launcher said as a plain ``exit 9`` (an
exit code, to a reader); its banner says ``Killed (signal 9)``, and the launcher's line
now names the SIGKILL (`exit_cause.hydra_account`)."""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from melissa_trainer.launcher.backends import MpiexecBackend
from melissa_trainer.launcher.exit_cause import hydra_account
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.tuning import LauncherTuning

#: each process is one rank (hydra's PMI_RANK). No MPI: hydra's report of a rank's end
#: does not depend on it. Rank 1 waits until rank 0 runs, then kills itself.
SOLVER = """
import os, signal, sys, time
from pathlib import Path

rank = int(os.environ["PMI_RANK"])
ready = Path(sys.argv[1])
print(f"rank {rank} running", flush=True)
if rank == 0:
    ready.touch()
    time.sleep(120)  # ended by hydra once rank 1 is gone
else:
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)
"""

#: hydra 4.x (MPICH 5.0.2), recorded: rank 1 of 2 did kill -9 itself
BANNER = """\
rank 0 of 2
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 6618 RUNNING AT vm
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
This typically refers to a problem with your application.
Please see the FAQ page for debugging suggestions
"""
KILL = "SIGKILL: the kernel's out-of-memory killer, scancel --signal=KILL, or kill -9"


def test_hydra_banner_read() -> None:
    lines = BANNER.splitlines()
    assert hydra_account(9, lines) == f"mpiexec: a rank's end: Killed (signal 9), {KILL}"
    segv = [line.replace("Killed (signal 9)", "Segmentation fault (signal 11)") for line in lines]
    assert hydra_account(11, segv) == (
        "mpiexec: a rank's end: Segmentation fault (signal 11), SIGSEGV"
    )
    assert hydra_account(3, lines) is None  # not the code's: not claimed
    assert hydra_account(9, [*lines, "rank 0 running"]) is None  # a later attempt's output
    assert hydra_account(9, ["rank 0 running"]) is None


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_sigkilled_rank_is_named_in_the_failure_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if shutil.which("mpiexec") is None and not (Path(sys.executable).parent / "mpiexec").exists():
        pytest.skip("no mpiexec (pip install mpich)")
    (tmp_path / "solver.py").write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(tmp_path / "solver.py"), str(tmp_path / "rank0-ready")],
        [{"a": 0.0}],
        1,
        backend=MpiexecBackend(),
        ranks_per_simulation=2,
        log_dir=tmp_path / "logs",
        # a restart: the failed attempt's line (which says how it ended) comes before it
        tuning=LauncherTuning(max_restarts=1, on_failure="abandon", systematic_failures=None),
    )
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    launcher.start(tmp_path / "rdv", study_dir=tmp_path)

    def failed() -> list[str]:
        said = (r.getMessage() for r in caplog.records)
        return [m for m in said if m.startswith("simulation 0 attempt 0 failed")]

    def first_failure() -> bool:
        # the line first: its restart fails too, and the study with it (abandoned, the
        # only simulation), so a poll that comes late (a loaded machine) finds both; the
        # study's error raised only if the line never came
        if failed():
            return True
        launcher.check()
        return False

    try:
        wait_until(first_failure, lambda: ("attempt 0's failure", launcher.summary()), 60)
    finally:
        launcher.stop()
    line, log = failed()[0], (tmp_path / "logs" / "sim-0.log").read_text()
    assert f"(exit 9 (mpiexec: a rank's end: Killed (signal 9), {KILL})" in line, (line, log)
