"""Review hrev11 (of 3914d6af..00d3489d): the Slurm queue WARNINGs cut at 100 columns
(hlines2, 40dba8a0, `queued_end._warn` -> `log_lines.cut`) may cut the command they
tell the user to run between its words: ``...; scancel`` at the end of one line and
``  40829771 to give it up`` on the next (likewise ``scontrol release`` / ``resume``).
Copied from the console, the line runs ``scancel`` with no job. `cut` keeps a number
with its unit (``5 s``), not a command with its job id; the job-log lines keep a command
whole on a line of its own (`launcher_line`'s ``whole``), these WARNINGs do not.

The oracle: the command as the WARNING's text holds it once the cut is undone
(`launcher_said.one_line`), looked for on one console line. Job names of 4 to 43
characters (a study's job names grow with its index and its restarts: ``sim-1234-r2``).
Reproduction only: xfail(strict).
"""

from __future__ import annotations

import logging
import re

import pytest
from launcher_said import one_line
from test_slurm_warnings_fit import ANSWERS, LOGGER, SOON

from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.queued_end import queue_words

JOB_ID = "40829771"
COMMAND = re.compile(rf"(?:scancel|scontrol \w+) {JOB_ID}")


def _said(caplog: pytest.LogCaptureFixture, name: str, case: str) -> str:
    caplog.clear()
    handle = SlurmHandle(job=Job(name, ()), job_id=JOB_ID, exit_stem="")
    for state, reason in ANSWERS[case][0]:
        queue_words(handle, f"{name} (Slurm job {JOB_ID})", state, reason, SOON)
        handle.state, handle.reason = state, reason
        handle.ran = handle.ran or state == "RUNNING"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1, said
    return said[0]


@pytest.mark.timeout(30)
@pytest.mark.xfail(
    strict=True,
    reason="hrev11 F4: log_lines.cut splits 'scancel JOBID' / 'scontrol release JOBID' "
    "across console lines in the queue WARNINGs (75 of 240 renderings here)",
)
def test_a_queue_warnings_commands_stay_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    split: list[str] = []
    seen = 0
    for case in ANSWERS:
        for length in range(40):
            said = _said(caplog, "sim-" + "x" * length, case)
            commands = COMMAND.findall(one_line(said))
            seen += len(commands)  # ("requeued" names none: it runs again by itself)
            lines = said.split("\n")
            cut = [c for c in commands if not any(c in line for line in lines)]
            split += [f"{case}, {length}: {c!r}" for c in cut]
    assert seen >= 5 * 40, seen
    assert split == [], split
