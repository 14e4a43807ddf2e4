"""Where the exit code of a batch job that ended comes from, in this order: the file its
script writes when its command ends (the robust path: it needs no accounting database;
`job_files.take_exit_file`), ``sacct`` (needs slurmdbd), ``scontrol show job`` (while
the controller remembers the job), and last its final state alone (COMPLETED -> 0,
anything else non-zero). Moved out of `batch` (its module-size limit), unchanged.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.launcher.backends.slurm import job_files as jf
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands

if TYPE_CHECKING:  # (annotations only)
    from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

__all__ = ["final_code"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")


def final_code(handle: SlurmHandle, job: str, commands: SlurmCommands) -> int:
    """The exit code of `handle`'s job (`job`: its description), which squeue reports
    ended or no longer lists (see the module docstring). Sets `handle.ran` when its
    script wrote the code, and `handle.final` from the accounting record if one is read.
    A job of an earlier run (`handle.stale`) is 1: cancelled, not run by this backend."""
    if handle.stale:
        return 1
    path = Path(ss.exit_file(handle.exit_stem, handle.job_id))
    text = jf.take_exit_file(path, job)
    if text is not None:
        handle.ran = True  # its script wrote the code: the job started
        try:
            return int(text)
        except ValueError:
            logger.warning("%s holds %r, not an exit code", path, text)
    record = commands.record(handle.job_id)
    if record is not None:
        handle.final = record[0]
        return sq.exit_code(*record)
    if handle.state is not None:
        return sq.exit_code(handle.state)
    logger.warning(
        "%s left the queue without an exit code (purged, or lost by the controller); "
        "counted as failed",
        job,
    )
    return 1
