"""srun's account of a job's tasks in the launcher's line (`exit_cause`), on recorded
srun stderr: when one rank of an ``srun --kill-on-bad-exit`` dies, srun ends the others
with SIGTERM and exits 143, which alone read as a scancel or a preemption (trial F8);
srun's own lines say which task ended first, and how."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from melissa_trainer.launcher.exit_cause import exit_text, srun_account, srun_task_ends

KILL = "SIGKILL: the kernel's out-of-memory killer, scancel --signal=KILL, or kill -9"
TERM = "SIGTERM: scancel, a job's time limit or preemption, or a kill"

#: Slurm 23.11, one-node test cluster: rank 1 of an mpi4py solver did kill -9 itself
KILLED = """\
rank 1 of 2
rank 0 of 2
srun: error: vm: task 1: Killed
srun: launch/slurm: _step_signal: Terminating StepId=1.0
slurmstepd-vm: error: *** STEP 1.0 ON vm CANCELLED AT 2026-11-30T21:26:10 ***
srun: error: vm: task 0: Terminated
srun: Force Terminated StepId=1.0
"""
#: the same cluster: the whole job scancelled (the launcher's kill)
CANCELLED = """\
rank 0 of 2
srun: Job step aborted: Waiting up to 4 seconds for job step to finish.
srun: got SIGCONT
slurmstepd-vm: error: *** STEP 1.0 ON vm CANCELLED AT 2026-11-30T21:44:35 ***
slurmstepd-vm: error: *** JOB 1 ON vm CANCELLED AT 2026-11-30T21:44:35 ***
srun: forcing job termination
srun: error: vm: tasks 0-1: Terminated
srun: launch/slurm: _step_signal: Terminating StepId=1.0
"""
#: the same cluster: rank 1 wrote a line without its newline, then was SIGKILLed (a
#: solver killed mid-print): srun's first line runs on from it, in the log as recorded
GLUED = """\
rank 0 running
rank 1 at step 7, no newline yetsrun: error: vm: task 1: Killed
srun: launch/slurm: _step_signal: Terminating StepId=11071694.0
slurmstepd-vm: error: *** STEP 11071694.0 ON vm CANCELLED AT 2026-12-01T01:02:19 ***
srun: error: vm: task 0: Terminated
srun: Force Terminated StepId=11071694.0
"""


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_killed_rank_is_named_not_srun_s_sigterm_of_the_others() -> None:
    assert srun_account(143, lines(KILLED)) == (
        f"srun: task 1: Killed first ({KILL}), then srun terminated the step: task 0: Terminated"
    )


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        ("task 1: Exited with exit code 3", "task 1: Exited with exit code 3 first, "),
        ("task 1: Segmentation fault", "task 1: Segmentation fault first (SIGSEGV), "),
        (
            "task 1: Segmentation fault (core dumped)",
            "task 1: Segmentation fault (core dumped) first (SIGSEGV), ",
        ),
        ("task 1: Aborted", "task 1: Aborted first (SIGABRT), "),
        ("task 1: Bus error", "task 1: Bus error first (SIGBUS), "),
        ("tasks 1,3-5: Killed", f"tasks 1,3-5: Killed first ({KILL}), "),
    ],
)
def test_how_the_first_task_ended_is_read(first: str, expected: str) -> None:
    log = KILLED.replace("task 1: Killed", first)
    assert srun_account(143, lines(log)) == (
        f"srun: {expected}then srun terminated the step: task 0: Terminated"
    )


def test_task_ends_parsed() -> None:
    ends, terminating = srun_task_ends(lines(KILLED))
    assert [(e.ids, e.code, e.signal) for e in ends] == [
        (frozenset({1}), 137, signal.SIGKILL),
        (frozenset({0}), 143, signal.SIGTERM),
    ]
    assert terminating
    many, _ = srun_task_ends(["srun: error: n[1-2]: tasks 0,2-4: Exited with exit code 7"])
    assert [(e.ids, e.code, e.signal, str(e)) for e in many] == [
        (frozenset({0, 2, 3, 4}), 7, None, "tasks 0,2-4: Exited with exit code 7")
    ]


def test_srun_s_line_run_on_from_a_rank_s_unfinished_one_is_read() -> None:
    """Read as if the rank had ended its line: before, the glued line was passed over,
    and the attempt read as task 0's SIGTERM (a scancel) once more."""
    assert srun_account(143, lines(GLUED)) == srun_account(143, lines(KILLED))
    assert srun_account(143, lines(GLUED)) == (
        f"srun: task 1: Killed first ({KILL}), then srun terminated the step: task 0: Terminated"
    )


def test_a_scancelled_job_stays_a_sigterm() -> None:
    assert srun_account(143, lines(CANCELLED)) == f"srun: tasks 0-1: Terminated ({TERM})"


def test_many_later_lines_are_cut() -> None:
    log = ["srun: error: n1: task 5: Killed"]
    log += [f"srun: error: n1: task {t}: Terminated" for t in (0, 1, 2, 3)]
    assert srun_account(143, log) == (
        f"srun: task 5: Killed first ({KILL}), then task 0: Terminated, task 1: Terminated, ..."
    )


@pytest.mark.parametrize(
    ("code", "log"),
    [
        (137, KILLED),  # the code is not srun's for these lines: not this attempt's
        (143, KILLED + "rank 0 of 2\n"),  # a later attempt printed after them
        (143, "rank 0 of 2\n"),  # no srun lines (a job of one rank, the local backend)
        (143, "srun: error: vm: task 1: Frobnicated\n"),  # words srun does not write
    ],
)
def test_no_claim_beyond_srun_s_lines(code: int, log: str) -> None:
    assert srun_account(code, lines(log)) is None


def test_an_earlier_attempt_s_lines_are_left_out() -> None:
    # the log is appended to by restarts: attempt 0's rank 1 was killed, attempt 1's
    # rank 0 exited with 2 (the highest: srun's status), then its rank 1 was terminated
    second = (
        "srun: error: vm: task 0: Exited with exit code 2\nsrun: error: vm: task 1: Terminated\n"
    )
    assert srun_account(143, lines(KILLED + second)) == (
        "srun: task 0: Exited with exit code 2 first, then task 1: Terminated"
    )


def test_exit_text_reads_the_log(tmp_path: Path) -> None:
    log = tmp_path / "sim-0.log"
    log.write_text(KILLED)
    said = exit_text(143, log, srun=True)
    assert said.startswith(f"exit 143 (srun: task 1: Killed first ({KILL}), ")
    assert exit_text(143, log) == f"exit 143 ({TERM})"  # (not srun's backend: not srun's)
    assert exit_text(143, tmp_path / "missing.log", srun=True) == f"exit 143 ({TERM})"
    assert exit_text(0, log, srun=True) == "exit 0"
    assert exit_text("timeout", log, srun=True) == "timeout"
    log.write_text("rank 0 of 2\n")
    assert exit_text(143, log) == f"exit 143 ({TERM})"
