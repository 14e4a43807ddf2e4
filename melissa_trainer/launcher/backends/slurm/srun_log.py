"""What srun wrote to a job's log in mode "srun" (`steps.SrunSteps`): where the log
was at srun's start, and srun's words for a failure before any task ran (a controller
outage: the steps module's docstring)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from melissa_trainer.launcher.backends.base import Job

if TYPE_CHECKING:  # (steps imports this module)
    from melissa_trainer.launcher.backends.slurm.srun_handle import SrunHandle

__all__ = ["BEFORE_TASKS", "LOG_READ", "before_tasks", "log_size"]

#: srun's words (lower case) for its failure before any task of the step ran (the steps
#: module's docstring): a `transient` reason after them makes the step run again
BEFORE_TASKS = (
    "srun: error: unable to confirm allocation for job",
    "srun: error: unable to create step for job",
)
#: the most of a log `SrunSteps` reads (from srun's start) to find those words
LOG_READ = 1 << 16


def log_size(job: Job) -> int:
    """The size of `job`'s log now (0 if it has none yet)."""
    try:
        return 0 if job.log_path is None else os.path.getsize(job.log_path)
    except OSError:
        return 0


def before_tasks(step: SrunHandle) -> str | None:
    """srun's line of `BEFORE_TASKS` in what its last run wrote to the job's log, or None
    (no log, none such)."""
    if step.job.log_path is None:
        return None
    try:
        with open(step.job.log_path, "rb") as log:
            log.seek(step.log_from)
            text = log.read(LOG_READ).decode(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.strip().lower().startswith(BEFORE_TASKS):
            return line.strip()
    return None
