"""`step_end.said_end` finds slurmstepd's line where srun writes it: at the end of
what the step wrote to the job's log, however much its solver printed before (a
solver's progress lines easily pass `LOG_READ`), and only in this srun's run (past
`log_from`, not an earlier attempt's line)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from launcher_said import MORE, one_line, said_in_log, too_long

from melissa_trainer.launcher.backends import Job
from melissa_trainer.launcher.backends.slurm.step_end import LOG_READ, said_end

pytestmark = pytest.mark.timeout(30)


def said_in_lines(said: str, log: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`said` in one WARNING and at the log's end, each in lines of at most 100 columns
    (before: one line of ~450 characters in each)."""
    warned = [r.getMessage() for r in caplog.records]
    assert [one_line(m) for m in warned] == [said], warned
    text = log.read_text()
    assert too_long(text) == [] and too_long(warned[0]) == [], (text, warned)
    assert said_in_log(text)[-1].split(": ", 1)[1] == said, text
    assert text.splitlines()[-1].startswith(MORE), text  # (its last line, the log's)


LINE = (
    "slurmstepd: error: *** STEP 12.3 ON node CANCELLED AT 2026-12-04T10:11:03 "
    "DUE TO TIME LIMIT ***\n"
)


def test_the_end_line_after_a_long_output_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "sim-1.log"
    earlier = "an earlier attempt's own output\n"
    progress = "".join(f"step {i}: residual 1.0e-3\n" for i in range(2 * LOG_READ // 20))
    log.write_text(earlier + progress + LINE)
    job = Job(name="sim-1", argv=["solver"], log_path=log)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
        said = said_end(job, "sim-1 (step 12.3)", len(earlier), "1")
    assert said is not None and "reached its time limit" in said, said
    said_in_lines(said, log, caplog)


def test_an_earlier_attempts_line_is_not_said(tmp_path: Path) -> None:
    log = tmp_path / "sim-1.log"
    log.write_text(LINE + "x" * 10)
    job = Job(name="sim-1", argv=["solver"], log_path=log)
    assert said_end(job, "sim-1 (step 12.4)", len(LINE), "1") is None


#: what srun wrote for steps scancelled as soon as squeue listed them (the one-node test
#: cluster, Slurm 22.05): no slurmstepd line, the launch aborted or the step just aborted
ABORTED_LOGS = {
    "launch": (
        "srun: launch/slurm: launch_p_step_launch: StepId=30183199.2 aborted before step "
        "completely launched.\nsrun: Job step aborted: Waiting up to 4 seconds for job step "
        "to finish.\nsrun: error: vm: task 0: Killed\n",
        "launch_p_step_launch: StepId=30183199.2 aborted before step completely launched",
    ),
    "step": (
        "srun: Job step aborted: Waiting up to 4 seconds for job step to finish.\n"
        "srun: error: vm: task 0: Killed\n",
        "srun: Job step aborted",
    ),
}


@pytest.mark.parametrize("case", sorted(ABORTED_LOGS))
def test_a_step_cancelled_as_it_launched_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    """Failed before: slurmstepd writes nothing for such a step, so nothing was said
    (said_end returned None) and only srun's exit code 137 told of it."""
    text, words = ABORTED_LOGS[case]
    log = tmp_path / "sim-1.log"
    log.write_text(text)
    job = Job(name="sim-1", argv=["solver"], log_path=log)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
        said = said_end(job, "sim-1 (step 2)", 0, None)
    assert said is not None and "was ended by Slurm as it launched" in said, said
    assert f"(srun: '{words}';" in said, said
    said_in_lines(said, log, caplog)


def test_a_ranks_failure_ending_its_step_is_not_said_as_a_cancel(tmp_path: Path) -> None:
    """srun's --kill-on-bad-exit end of a 2-rank step whose rank 1 exited 3 (its log on
    the test cluster). Failed before: said as "cancelled while running ... by a scancel
    of the step or of the allocation", though nobody cancelled it."""
    log = tmp_path / "sim-1.log"
    log.write_text(
        "srun: error: vm: task 1: Exited with exit code 3\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=43098957.0\n"
        "slurmstepd-vm: error: *** STEP 43098957.0 ON vm CANCELLED AT 2026-12-04T13:55:54 ***\n"
        "srun: error: vm: task 0: Terminated\nsrun: Force Terminated StepId=43098957.0\n"
    )
    job = Job(name="sim-1", argv=["solver"], log_path=log, ranks=2)
    assert said_end(job, "sim-1 (step 0)", 0, None) is None
    assert "melissa-trainer" not in log.read_text()
