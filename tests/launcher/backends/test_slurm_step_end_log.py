"""`step_end.said_end` finds slurmstepd's line where srun writes it: at the end of
what the step wrote to the job's log, however much its solver printed before (a
solver's progress lines easily pass `LOG_READ`), and only in this srun's run (past
`log_from`, not an earlier attempt's line)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends import Job
from melissa_trainer.launcher.backends.slurm.step_end import LOG_READ, said_end

pytestmark = pytest.mark.timeout(30)

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
    assert said in caplog.text
    assert log.read_text().endswith(f"{said}\n")


def test_an_earlier_attempts_line_is_not_said(tmp_path: Path) -> None:
    log = tmp_path / "sim-1.log"
    log.write_text(LINE + "x" * 10)
    job = Job(name="sim-1", argv=["solver"], log_path=log)
    assert said_end(job, "sim-1 (step 12.4)", len(LINE), "1") is None
