"""Severity MEDIUM. A user trial (trial htrial9): a 2-rank Fortran solver (`mpi_f08`, the
`melissa_trainer_mpi` module, `mt_close` without `ierr`) under the mpiexec backend, the
trainer started with a stale ``MELISSA_TRAINER_ENDPOINTS`` in its environment: every
simulation's close failed after the client's 60 s and gfortran's ``error stop`` printed
"ERROR STOP 8" and a backtrace. The study's stop quoted the failure as "last log line
'#10  0xffffffffffffffff in ???'" and grouped the failures by that frame; the client's
line above it, which names the endpoint and the fix, was not quoted.

Now the Fortran runtime's error-stop and backtrace lines are passed over as MPI's abort
banner is, and the failure key masks what differs between attempts of the same failure
in the client's words (its simulation id, "tried for 69 s" then "70 s"), so that the
study still stops after 4 attempts, quoting the client's line. The log text is the
trial's (``oute/study/logs/sim-*.log``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.launcher.reports import failure_report, log_tail
from melissa_trainer.launcher.systematic import SystematicFailure, failure_key, failure_line

CLOSE = (
    "melissa_trainer: mt_close: simulation {s} rank {r}: queued messages not delivered to "
    "tcp://localhost:5599: the receiver is unreachable, tried for {t} s "
    "(mt_set_disconnected_timeout=60.0 s): no receiver ever accepted a connection at "
    "tcp://localhost:5599: check the endpoint (the trainer's rank_N.json) or start the "
    "trainer first"
)
BACKTRACE = """ERROR STOP 8

Error termination. Backtrace:
#0  0x7f79df0218c2 in ???
#1  0x7f79df0223b9 in ???
#7  0x7f79dee45249 in __libc_start_call_main
\tat ../sysdeps/nptl/libc_start_call_main.h:58
#8  0x7f79dee45304 in __libc_start_main_impl
\tat ../csu/libc-start.c:360
#9  0x563133b46280 in ???
#10  0xffffffffffffffff in ???
"""


def attempt_log(path: Path, sid: int, seconds: int) -> Path:
    """One attempt's log as the trial's: both ranks' close line, each rank's error stop,
    the backtrace of the rank that ended last."""
    path.write_text(
        CLOSE.format(s=sid, r=0, t=seconds)
        + "\nERROR STOP 8\n\nError termination. Backtrace:\n"
        + CLOSE.format(s=sid, r=1, t=seconds)
        + "\n"
        + BACKTRACE
    )
    return path


@pytest.mark.timeout(30)
def test_the_client_line_above_a_fortran_backtrace_is_the_failure(tmp_path: Path) -> None:
    log = attempt_log(tmp_path / "sim-0.log", 0, 69)
    line, passed = failure_line(log)
    assert line == CLOSE.format(s=0, r=1, t=69)
    assert passed == "the Fortran runtime's backtrace"
    # an error stop with a message is the solver's reason, kept
    log.write_text("ERROR STOP mesh file not found\n")
    assert failure_line(log) == ("ERROR STOP mesh file not found", "")


@pytest.mark.timeout(30)
def test_the_study_stops_after_four_attempts_quoting_the_client(tmp_path: Path) -> None:
    check = SystematicFailure(4)
    said = []
    for attempt, (sid, seconds) in enumerate([(1, 70), (0, 69), (1, 69), (0, 67)]):
        log = attempt_log(tmp_path / f"sim-{sid}-{attempt}.log", sid, seconds)
        said.append(check.failed(sid, 8, log))
    assert said[:3] == [None, None, None]
    assert said[3] is not None
    assert "no receiver ever accepted a connection at tcp://localhost:5599" in said[3]
    assert "(the last before the Fortran runtime's backtrace)" in said[3]
    assert "0xffffffffffffffff" not in said[3]


@pytest.mark.timeout(30)
def test_the_report_quotes_one_kind(tmp_path: Path) -> None:
    logs = {sid: attempt_log(tmp_path / f"sim-{sid}.log", sid, 69 + sid) for sid in range(2)}
    failed = [(sid, f"simulation {sid} failed", (8, 8)) for sid in range(2)]
    kinds = [line for line in failure_report(failed, logs.__getitem__, tmp_path) if "alike" in line]
    assert len(kinds) == 1 and "2 simulations (0, 1) failed alike" in kinds[0]


@pytest.mark.timeout(30)
def test_the_key_masks_only_what_differs_between_attempts() -> None:
    assert failure_key(CLOSE.format(s=0, r=0, t=69)) == failure_key(CLOSE.format(s=3, r=1, t=70))
    assert "MELISSA_TRAINER_SIMULATION_ID=N" in failure_key("MELISSA_TRAINER_SIMULATION_ID=12")
    assert "since HH:MM:SS" in failure_key("tried since 11:04:15")
    # a field's size, a parameter's value or a solver's own words about its simulation are
    # not masked: another one is another failure
    assert failure_key("diverged in simulation 0") != failure_key("diverged in simulation 1")
    assert failure_key("given 31 elements") != failure_key("given 30 elements")
    assert failure_key("diverged at t=0.53") != failure_key("diverged at t=0.71")


@pytest.mark.timeout(30)
def test_the_quoted_tail_ends_at_the_client_line(tmp_path: Path) -> None:
    """The report's "last lines of sim-0.log" were five frames of the backtrace."""
    log = attempt_log(tmp_path / "sim-0.log", 0, 69)
    tail = log_tail(log).splitlines()
    assert tail[-2] == "    | " + CLOSE.format(s=0, r=1, t=69)
    after = len([line for line in BACKTRACE.splitlines() if line.strip()])  # (10)
    assert tail[-1] == f"    (then {after} lines of the Fortran runtime's backtrace)"
    assert not [line for line in tail if "0x" in line]
    log.write_text(BACKTRACE)  # nothing else: the backtrace is what there is
    assert "#10  0xffffffffffffffff in ???" in log_tail(log)
