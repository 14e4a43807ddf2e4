"""What the log says of a batch job that ended while still queued (trial htrial15, s6:
a ``scancel`` of a PENDING job was reported ``simulation 2 attempt 0 failed (exit 1,
2.0 s)`` with nothing in the simulation's log for that attempt, whereas a cancelled
running job gets srun's ``Terminated`` lines).

A job that squeue never listed started (`queries.STARTED_STATES`), whose script wrote no
exit code, and whose final state is CANCELLED, was cancelled in the queue (Slurm writes
nothing to its log: the ``--output`` file is opened when the job starts), or just after
it started, within one poll, before its script wrote a code: the words say only what
is known (the last state squeue listed, no exit code), not "never started". Other final
states reached between two squeue calls are not claimed (a job that ran for less than
`poll_every` and failed before its script wrote a code would look the same).
A job that ran is said the same way when Slurm ended it, not the study: its time limit
(TIMEOUT: the attempt reads ``exit 143 (SIGTERM: ...)``, which alone does not tell a
time limit from a scancel, and every restart gets the same limit), or someone's scancel
(CANCELLED). `queued_end` says it in the job's log and, for a cancellation that is not the study's
own (`SlurmHandle.cancelled`: its kill, its close, `begin_study`), in a warning on the
console, just before the launcher's line about the failed attempt: who cancelled it
(the study, or someone's ``scancel``), and what the launcher does next (it counts as a
failed attempt: a restart while some are left, else the failure policy).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (batch imports this module)
    from melissa_trainer.launcher.backends.slurm.batch import SlurmHandle

__all__ = ["queued_end", "queued_text"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: what the launcher does with the attempt (its restarts and failure policy decide)
NEXT = (
    "the launcher counts it as a failed attempt: it runs the simulation again while "
    "restarts are left (LauncherTuning.max_restarts), then applies "
    "LauncherTuning.on_failure"
)


def queued_text(job: str, by_study: bool) -> str:
    """How a job `job` (``NAME (Slurm job ID)``) cancelled without having been seen
    started is said; `by_study`: this backend cancelled it. Only what is known: it may
    have started and been cancelled within one poll, before its script wrote a code."""
    known = "squeue last listed it PENDING; it wrote no exit code"
    if by_study:
        return f"{job} was cancelled while queued or just as it started ({known}), by the study"
    return (
        f"{job} was cancelled while queued or just as it started ({known}), not by the "
        "study (it cancels only the jobs it stops): by a scancel, yours or an "
        f"administrator's; {NEXT}"
    )


def running_text(job: str, final: str, time_limit: str | None) -> str | None:
    """How a job `job` that ran and that Slurm, not the study, ended in state `final` is
    said: its time limit (``TIMEOUT``; `time_limit`, the backend's, None: the partition's
    default or an ``extra_args`` ``--time``), or a scancel (``CANCELLED``); None for any
    other final state."""
    if final == "TIMEOUT":
        limit = (
            f"--time={time_limit}, SlurmBackend's time_limit"
            if time_limit is not None
            else "SlurmBackend's time_limit is None: the partition's DefaultTime (scontrol "
            "show partition), or a --time of extra_args"
        )
        return (
            f"{job} reached its time limit ({limit}; squeue: TIMEOUT): Slurm ended it "
            "(SIGTERM, then SIGKILL), not the solver's own failure; every attempt gets the "
            f"same limit: raise time_limit; {NEXT}"
        )
    if final == "CANCELLED":
        return (
            f"{job} was cancelled while running (squeue: CANCELLED), not by the study (it "
            f"cancels only the jobs it stops): by a scancel, yours or an administrator's, or by "
            f"its lease (a trainer that stopped renewing it for lease_timeout); {NEXT}"
        )
    return None


def queued_end(handle: SlurmHandle, job: str, time_limit: str | None = None) -> str | None:
    """If `handle`'s job ended before it was seen started (module docstring), say so in its log
    (appended, with the time) and, unless the study cancelled it, in a warning; likewise
    a job that ran and that Slurm ended, not the study (`running_text`: its time limit,
    someone's scancel). The text, or None for a job that ended otherwise, or a job of an
    earlier run (not the launcher's). A log that cannot be written is said in a warning."""
    if handle.stale or handle.final is None:
        return None
    if handle.ran:
        said = None if handle.cancelled else running_text(job, handle.final, time_limit)
        if said is None:
            return None
        text = said
    elif handle.final != "CANCELLED":
        return None
    else:
        text = queued_text(job, handle.cancelled)
    if handle.cancelled:
        logger.debug("%s", text)
    else:
        logger.warning("%s", text)
    if handle.job.log_path is not None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        try:
            path = Path(handle.job.log_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as log:
                log.write(f"melissa-trainer: {stamp}: {text}\n")
        except OSError as exc:
            logger.warning("cannot write to %s (%s): %s", handle.job.log_path, exc, text)
    return text
