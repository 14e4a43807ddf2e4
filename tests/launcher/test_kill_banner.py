"""A failure report quotes the solver's last lines, not the banner hydra (MPICH's
mpiexec) prints when the launcher's kill terminates it (trial F3: "YOU CAN IGNORE THE
BELOW CLEANUP MESSAGES ... Terminated (signal 15)" quoted as a refused simulation's
"last lines", and the same last line for every killed job). A banner of another end (a
rank's segmentation fault) says how the solver died and stays. The real banner: an
mpiexec job killed by `MpiexecBackend.kill`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec

from melissa_trainer.launcher.backends import Job, MpiexecBackend
from melissa_trainer.launcher.reports import log_tail
from melissa_trainer.launcher.systematic import last_log_line

MPIEXEC = find_mpiexec()

BANNER = """
===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 15464 RUNNING AT vm
=   EXIT CODE: {code}
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: {end}
This typically refers to a problem with your application.
Please see the FAQ page for debugging suggestions
"""
TERM = BANNER.format(code=15, end="Terminated (signal 15)")
SEGV = BANNER.format(code=139, end="Segmentation fault (signal 11)")


def test_the_banner_of_a_sigterm_is_left_out_of_the_quoted_lines(tmp_path: Path) -> None:
    log = tmp_path / "sim-0.log"
    log.write_text("step 1\nrank 0: HELLO refused\n" + TERM + TERM)  # two attempts' kills
    assert log_tail(log) == "    | step 1\n    | rank 0: HELLO refused"
    assert last_log_line(log) == "rank 0: HELLO refused"
    log.write_text(TERM)  # the solver printed nothing
    assert "nothing but mpiexec's banner" in log_tail(log)
    assert last_log_line(log) == ""
    log.write_text("step 1\n" + SEGV)  # how the solver died: kept
    assert log_tail(log).endswith("| Please see the FAQ page for debugging suggestions")
    assert "Segmentation fault (signal 11)" in log_tail(log)


@pytest.mark.e2e
@pytest.mark.skipif(MPIEXEC is None, reason=NO_MPI)
@pytest.mark.timeout(60)
def test_a_killed_mpiexec_jobs_log_quotes_the_solver(tmp_path: Path) -> None:
    assert MPIEXEC is not None
    log = tmp_path / "sim-0.log"
    # Only rank 0 prints: hydra forwards each rank's output in its own chunks, and two
    # ranks' lines can interleave mid-line ("solver step 7solver step 7"; CI, stop 64).
    # Each rank says it started with a file of its own, so the kill finds both running.
    code = (
        "import os, pathlib, time; rank = os.environ['PMI_RANK']\n"
        "if rank == '0': print('solver step 7', flush=True)\n"
        f"pathlib.Path({str(tmp_path)!r}, 'started-' + rank).touch()\n"
        "time.sleep(60)"
    )
    backend = MpiexecBackend(MPIEXEC)
    handle = backend.launch(Job("sim-0", [sys.executable, "-c", code], log_path=log, ranks=2))
    try:
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("started-*"))) < 2 or "solver step 7" not in (
            log.read_text() if log.exists() else ""
        ):
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.02)
        backend.kill(handle, grace=10.0)  # SIGTERM: hydra writes its banner
    finally:
        backend.close()
    text = log.read_text()
    assert "Terminated (signal 15)" in text, text  # the real banner (the oracle's input)
    assert log_tail(log) == "    | solver step 7", text
    assert last_log_line(log) == "solver step 7"
