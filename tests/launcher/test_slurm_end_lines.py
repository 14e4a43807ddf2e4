"""A failure report quotes the solver's last lines, not Slurm's and the batch script's
shell's lines of a kill (`log_lines.SLURM_END`); Slurm's lines of a rank's own end stay.
The lines of a batch job and of a step, as the one-node test cluster wrote them
(test_slurm_job_log_lines.py has the real job); bash's line of a command it ran, in its
format (``<script>: line K: PID Terminated <command>``). Failed before: each log's quote
ended with Slurm's or bash's line, and its last log line (which groups failures) was it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from launcher_said import PREFIX
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, LocalBackend
from melissa_trainer.launcher.exit_cause import exit_text
from melissa_trainer.launcher.reports import log_tail
from melissa_trainer.launcher.systematic import last_log_line

BATCH = """step 3 sent
slurmstepd-vm: error: *** JOB 4082977 ON vm CANCELLED AT 2026-12-07T07:19:25 ***
Terminated
"""
TIME_LIMIT = """step 3 sent
slurmstepd-vm: error: *** JOB 12 ON vm CANCELLED AT 2026-12-04T10:11:03 DUE TO TIME LIMIT ***
/var/spool/slurmd/job00012/slurm_script: line 40:  7731 Terminated              python solver.py
"""
STEP = """step 3 sent
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
slurmstepd-vm: error: *** STEP 35310072.0 ON vm CANCELLED AT 2026-12-01T03:49:36 ***
srun: error: vm: tasks 0-1: Terminated
srun: Force Terminated StepId=35310072.0
"""


@pytest.mark.parametrize("text", [BATCH, TIME_LIMIT, STEP], ids=["batch", "time_limit", "step"])
def test_slurms_lines_of_a_kill_are_not_quoted(tmp_path: Path, text: str) -> None:
    log = tmp_path / "sim-0.log"
    log.write_text(text)
    assert log_tail(log) == "    | step 3 sent"
    assert last_log_line(log) == "step 3 sent"


def test_a_rank_s_own_end_is_quoted_and_exit_cause_still_reads_srun(tmp_path: Path) -> None:
    """srun's line of a rank's segmentation fault says the solver's failure: quoted. The
    lines left out of the quote still name the cause (`exit_cause` reads all lines)."""
    log = tmp_path / "sim-0.log"
    log.write_text(
        "step 3 sent\nsrun: error: vm: task 1: Segmentation fault\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=7.0\n"
        "slurmstepd-vm: error: *** STEP 7.0 ON vm CANCELLED AT 2026-12-01T03:49:36 ***\n"
        "srun: error: vm: task 0: Terminated\nsrun: Force Terminated StepId=7.0\n"
    )
    assert log_tail(log) == "    | step 3 sent\n    | srun: error: vm: task 1: Segmentation fault"
    said = exit_text(143, log, srun=True)
    assert said.startswith("exit 143 (srun: task 1: Segmentation fault first (SIGSEGV"), said
    assert "then srun terminated the step: task 0: Terminated" in said, said


def test_only_slurms_lines_say_so_and_a_solvers_own_words_stay(tmp_path: Path) -> None:
    """A log of nothing but Slurm's lines says so; a solver's line that merely starts
    with "Terminated" is its own."""
    log = tmp_path / "sim-0.log"
    log.write_text(BATCH.split("\n", 1)[1])
    assert log_tail(log) == (
        "    (nothing but Slurm's lines of the job's end: the solver printed nothing)"
    )
    log.write_text("Terminated normally after 3 steps\n")
    assert log_tail(log) == "    | Terminated normally after 3 steps"


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("backend", ["local", "slurm"])
def test_a_bare_terminated_is_a_local_jobs_own_line(tmp_path: Path, backend: str) -> None:
    """A local job whose solver's last line is a bare ``Terminated`` (a shell's, of a
    command the solver ran): its own line, quoted and its failure line. Failed before:
    left out as Slurm's (`SLURM_END`), the quote ending at the line above. A log whose
    start line names the Slurm backend still leaves it out (the batch script's shell)."""
    log = tmp_path / "logs" / "sim-0.log"
    solver = "import sys; print('step 3 sent'); print('Terminated'); sys.exit(1)"
    job = Job("sim-0", [sys.executable, "-c", solver], cwd=tmp_path, log_path=log)
    job.say_start("simulation 0 attempt 0", backend)  # (the launcher's start line, first)
    local = LocalBackend()
    try:
        handle = local.launch(job)
        wait_until(lambda: local.poll(handle) is not None, what="the solver's end", timeout=50)
    finally:
        local.close()
    lines = log.read_text().splitlines()  # (the start line, cut: the launcher's lines)
    assert lines[-2:] == ["step 3 sent", "Terminated"], lines
    assert all(line.startswith(PREFIX) for line in lines[:-2]), lines
    if backend == "local":
        assert log_tail(log) == "    | step 3 sent\n    | Terminated"
        assert last_log_line(log) == "Terminated"
    else:
        assert log_tail(log) == "    | step 3 sent"
        assert last_log_line(log) == "step 3 sent"
