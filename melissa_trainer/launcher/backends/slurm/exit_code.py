"""Where the exit code of a batch job that ended comes from, in this order: the file its
script writes when its command ends (the robust path: it needs no accounting database;
`job_files.take_exit_file`), ``sacct`` (needs slurmdbd), ``scontrol show job`` (while
the controller remembers the job), and last its final state alone (COMPLETED -> 0,
anything else non-zero). Moved out of `batch` (its module-size limit).

A job that squeue listed started (RUNNING) and that a scancel ended before its script
ran (slurmd had not launched it yet: a loaded node, or slurmd slow to answer) wrote no
code, and Slurm's record holds none of a signal: ``JobState=CANCELLED ExitCode=1:0``
(seen on the one-node test cluster, a scancel while slurmd was stopped; and once under
CI's load). Read as it is, the attempt read ``exit 1``, a solver's own failure; it is
`CANCELLED_CODE`, as every other scancel of a started job reads (the SIGTERM Slurm
sends its processes): ``exit 143 (SIGTERM: scancel, ...)``. A job cancelled while
queued and never seen started stays 1, said by `queued_end.queued_text`; one that ran
and that Slurm requeued, cancelled while pending again, was seen started: 143 too.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.launcher.backends.slurm import job_files as jf
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands

if TYPE_CHECKING:  # (annotations only)
    from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

__all__ = ["CANCELLED_CODE", "final_code"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: the code of a started job cancelled before its script ran (module docstring): a
#: SIGTERM's, as a shell reports it, which is what a scancel of a running job reads
CANCELLED_CODE = 128 + signal.SIGTERM


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
        return _cancelled(handle, *record) or sq.exit_code(*record)
    if handle.state is not None:
        return _cancelled(handle, handle.state) or sq.exit_code(handle.state)
    logger.warning(
        "%s left the queue without an exit code (purged, or lost by the controller); "
        "counted as failed",
        job,
    )
    return 1


def _cancelled(handle: SlurmHandle, state: str, code: str = "") -> int | None:
    """`CANCELLED_CODE` for a job seen started (`handle.ran`) whose final `state` is
    CANCELLED and whose Slurm `code` ("status:signal") names no signal: its script
    never ran (module docstring); None otherwise (the code says the job's end)."""
    signalled = code.partition(":")[2] not in ("", "0")
    return CANCELLED_CODE if handle.ran and state == "CANCELLED" and not signalled else None
