"""`SystematicFailure` on an MPI solver's logs (trial htrial10 F5, F6): the same failure
said by rank 0 or by rank 1 (MPICH's abort banner names the rank and node) is the same
failure, and the report quotes the solver's line above the banner, not the banner. The
log text is the trial's (``out/wrongsize/study/logs/sim-*.log``, ``out/abort``,
``out/slurmwheel``)."""

from __future__ import annotations

from pathlib import Path

from melissa_trainer.launcher.systematic import SystematicFailure, failure_key, failure_line

#: one attempt's log of the trial's 2-rank C solver that sends a part of the wrong size:
#: the rank that reaches the check first prints the client's error and calls MPI_Abort
SIZE = (
    "rank {r}: send step 0: field 'u': mt_send was given 31 elements, this rank's part "
    "has 32 (global shape (64,))\n"
    "Abort(4) on node {r} (rank {r} in comm 0): application called "
    "MPI_Abort(MPI_COMM_WORLD, 4) - process {r}\n"
)
#: the trial's FAIL=abort solver: MPI_Abort with nothing printed before
ABORT = (
    "Abort(7) on node {r} (rank {r} in comm 0): application called "
    "MPI_Abort(MPI_COMM_WORLD, 7) - process {r}\n"
)
#: srun's end of a step whose task 1 crashed (the trial's slurmwheel run)
SRUN_SEGV = """step 3
srun: error: vm: task 1: Segmentation fault
srun: launch/slurm: _step_signal: Terminating StepId=35310072.0
slurmstepd-vm: error: *** STEP 35310072.0 ON vm CANCELLED AT 2026-12-01T03:49:36 ***
srun: error: vm: task 0: Terminated
srun: Force Terminated StepId=35310072.0
"""


def verdicts(tmp_path: Path, template: str, code: int | str) -> list[str | None]:
    """Four failed attempts of simulations 0, 1, 0, 1, failing on ranks 1, 0, 0, 1 (the
    trial's order), each with its own log: the check's verdict after each."""
    check = SystematicFailure(4)
    out = []
    for attempt, (sid, rank) in enumerate([(0, 1), (1, 0), (0, 0), (1, 1)]):
        log = tmp_path / f"sim-{sid}-{attempt}.log"
        log.write_text(template.format(r=rank))
        out.append(check.failed(sid, code, log))
    return out


def test_the_same_mpi_abort_on_another_rank_is_the_same_failure(tmp_path: Path) -> None:
    """The trial's study stopped after 6 attempts, not 4 (the banner of rank 0 and of
    rank 1 differed), and quoted the banner; now after 4, quoting the client's error."""
    said = verdicts(tmp_path, SIZE, 4)
    assert said[:3] == [None, None, None]
    assert said[3] is not None
    assert (
        "exit code 4, log line \"rank 1: send step 0: field 'u': mt_send was given 31" in (said[3])
    )
    assert "(the last before the MPI launcher's abort banner)" in said[3]
    assert "Abort(4) on node" not in said[3]


def test_an_abort_with_nothing_before_it_quotes_the_banner(tmp_path: Path) -> None:
    said = verdicts(tmp_path, ABORT, 7)
    assert said[3] is not None
    assert "last log line 'Abort(7) on node 1 (rank 1 in comm 0)" in said[3]


def test_different_failures_still_turn_the_check_off(tmp_path: Path) -> None:
    check = SystematicFailure(4)
    logs = [tmp_path / f"{i}.log" for i in range(4)]
    for i, log in enumerate(logs):
        log.write_text(SIZE.format(r=0) if i % 2 else ABORT.format(r=0))
    assert [check.failed(i % 2, 4, log) for i, log in enumerate(logs)] == [None] * 4
    assert check.off


def test_failure_line_and_key(tmp_path: Path) -> None:
    log = tmp_path / "srun.log"
    log.write_text(SRUN_SEGV)
    # (srun's and slurmstepd's lines of the step's kill after it are not read at all:
    # `log_lines.SLURM_END`; the segmentation fault, the rank's own end, is kept)
    assert failure_line(log) == ("srun: error: vm: task 1: Segmentation fault", "")
    log.write_text("solver step 7\n")
    assert failure_line(log) == ("solver step 7", "")
    assert failure_line(tmp_path / "missing.log") == ("", "")
    one, zero = (ABORT.format(r=r).strip() for r in (1, 0))
    assert failure_key(one) == failure_key(zero) != one
    assert failure_key("pid 13719 rank 3") == "pid N rank N"
    # numbers that are not a rank's stay: another size is another failure
    assert failure_key("given 31 elements") != failure_key("given 30 elements")


def test_the_startup_timeout_stop_offers_worker_mode_to_python_solvers_only(
    tmp_path: Path,
) -> None:
    """The trial's C solver was told to use worker mode (``Launcher(..., worker=True)``),
    which needs the Python client's next_simulation(): it is now said to be for a
    Python solver only."""
    said = verdicts(tmp_path, "", "timeout")
    assert said[3] is not None
    assert "LauncherTuning(startup_timeout=...)" in said[3]
    assert "Only a Python solver (the Python client) can" in said[3]
    assert "the C and Fortran clients have no worker mode" in said[3]
