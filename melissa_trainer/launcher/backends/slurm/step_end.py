"""What ended an srun step that the study did not kill, when Slurm did (mode "srun",
`SrunSteps.poll`): its time limit (the step's ``--time``, the backend's `time_limit`),
a preemption, its node's failure, or someone's scancel of the step or of the allocation.

srun's exit code alone does not tell them from the solver's own failure. slurmstepd
says it in a line srun writes to the job's log ("slurmstepd: error: *** STEP 12.3 ON
node CANCELLED AT 2026-12-04T10:11:03 DUE TO TIME LIMIT ***"; no "DUE TO" for a
scancel), read at the end of what the step wrote (past where the log was at srun's
start): srun writes it as the step ends, after all the solver's own output. `said_end`
says it in a WARNING and appends it to the log, as `queued_end` does for a batch job.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.backends.slurm.queued_end import NEXT

__all__ = ["end_text", "said_end"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: slurmstepd's line of a step that Slurm ended; group 1: the cause, if said
STEP_END = re.compile(r"\*\*\* STEP \S+ ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")
#: the most of a log read to find that line: its last bytes (never before srun's start),
#: where srun writes it as the step ends; a solver's output before it may be far longer
LOG_READ = 1 << 16


def end_text(job: str, cause: str | None, time_limit: str | None) -> str:
    """How step `job` ended by Slurm for `cause` (slurmstepd's "DUE TO" words; None: a
    scancel) is said."""
    line = f"slurmstepd: CANCELLED{'' if cause is None else ' DUE TO ' + cause}"
    if cause == "TIME LIMIT":
        limit = (
            f"--time={time_limit}, SlurmBackend's time_limit"
            if time_limit is not None
            else "time_limit is None: the allocation's own limit"
        )
        return (
            f"{job} reached its time limit ({limit}; {line}): Slurm ended the step, not the "
            f"solver's own failure; every attempt gets the same limit: raise time_limit; {NEXT}"
        )
    if cause is None:
        return (
            f"{job} was cancelled while running ({line}), not by the study (it cancels "
            "only the steps it stops): by a scancel of the step or of the allocation, yours "
            f"or an administrator's; {NEXT}"
        )
    return f"{job} was ended by Slurm ({line}), not the solver's own failure; {NEXT}"


def said_end(job: Job, description: str, log_from: int, time_limit: str | None) -> str | None:
    """If `job`'s log says (in its last `LOG_READ` bytes, past `log_from`) that Slurm
    ended its step, say how in a WARNING and in the log; the text, or None (no log, no
    such line)."""
    if job.log_path is None:
        return None
    try:
        with open(job.log_path, "rb") as log:
            size = log.seek(0, 2)
            log.seek(max(log_from, size - LOG_READ))
            text = log.read(LOG_READ).decode(errors="replace")
    except OSError:
        return None
    found = STEP_END.search(text)
    if found is None:
        return None
    said = end_text(description, found.group(1), time_limit)
    logger.warning("%s", said)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    try:
        with open(Path(job.log_path), "a") as log:
            log.write(f"melissa-trainer: {stamp}: {said}\n")
    except OSError as exc:
        logger.warning("cannot write to %s (%s): %s", job.log_path, exc, said)
    return said
