"""What ended an srun step that the study did not kill, when Slurm did (mode "srun",
`SrunSteps.poll`): its time limit (the step's ``--time``, the backend's `time_limit`),
a preemption, its node's failure, or someone's scancel of the step or of the allocation.

srun's exit code alone does not tell them from the solver's own failure. slurmstepd
says it in a line srun writes to the job's log ("slurmstepd: error: *** STEP 12.3 ON
node CANCELLED AT 2026-12-04T10:11:03 DUE TO TIME LIMIT ***"; no "DUE TO" for a
scancel), read at the end of what the step wrote (past where the log was at srun's
start): srun writes it as the step ends, after all the solver's own output. `said_end`
says it in a WARNING and appends it to the log, as `queued_end` does for a batch job.

A step cancelled as it launches (before slurmstepd ran its tasks) gets no slurmstepd
line: only srun's ("srun: launch/slurm: launch_p_step_launch: StepId=12.3 aborted before
step completely launched.", or just "srun: Job step aborted: Waiting up to 4 seconds for
job step to finish.", then "task 0: Killed" and exit 137; seen on the one-node test
cluster, a step scancelled as soon as squeue listed it, 4 of 4 runs). `ABORTED` finds
those words, said with no cause: Slurm does not give one there.

A multi-rank step runs with ``--kill-on-bad-exit=1``: one rank's failure makes srun end
the others ("srun: launch/slurm: _step_signal: Terminating StepId=12.0", then
slurmstepd's "CANCELLED" line with no "DUE TO", as for a scancel; seen on the test
cluster, a 2-rank step whose rank 1 exited 3). That is the solver's own failure
(`OWN_KILL` before the line): nothing is said.

A node of the step that stops answering (its power lost: the two-node test cluster's
`vanish`) ends the step once the controller marks the node down (its SlurmdTimeout):
srun writes "srun: error: Node failure on n1" and exits 0, having heard of no task's
end (Slurm 22.05; seen in a user trial of the two-node cluster, and
test_slurm_srun_two_nodes.py). That 0 is no success: the simulation sent a few of its
steps. `node_failure` finds those words (`NODE_FAILURE`) and says it; `SrunSteps.poll`
then reports `LOST_CODE`, a failed attempt, as the batch mode reports a NODE_FAIL job
(`queries.exit_code`). Before, the step counted as finished and the study waited for
its missing steps for ever.

An allocation that has ended (a node lost without ``--no-kill``, its time limit, a
scancel of it) starts no step any more: srun says "srun: error: Slurm job 12 has
expired" and exits 1 (seen on the one-node test cluster, an srun into a cancelled
allocation, and on two nodes after n1 vanished). `allocation_ended` finds those words
for the backend's own allocation (`EXPIRED`), and `SrunSteps.launch` then refuses every
step with them: the study stops at once, saying why, where each simulation's restarts
failed the same way until the failure policy gave up on one ("simulation 0 failed 3
times"), blaming it.
"""

from __future__ import annotations

import logging
import re

from melissa_trainer.launcher.backends.base import Job
from melissa_trainer.launcher.backends.slurm.queued_end import NEXT
from melissa_trainer.launcher.log_lines import cut, launcher_line

__all__ = [
    "ABORTED",
    "LOST_CODE",
    "NODE_FAILURE",
    "EXPIRED",
    "aborted_text",
    "allocation_ended",
    "end_text",
    "node_failure",
    "said_end",
]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: slurmstepd's line of a step that Slurm ended; group 1: the cause, if said
STEP_END = re.compile(r"\*\*\* STEP \S+ ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")
#: srun's words as it ends the other ranks of a step after one rank's failure
#: (``--kill-on-bad-exit``): a "CANCELLED" after them is srun's, not Slurm's
OWN_KILL = re.compile(r"_step_signal: Terminating StepId=")
#: srun's words for a step that Slurm ended, said when slurmstepd said nothing (module
#: docstring): the launch's abort first, the more telling of the two
ABORTED = (
    re.compile(r"launch_p_step_launch: StepId=\S+ aborted before step completely launched"),
    re.compile(r"srun: Job step aborted"),
)
#: srun's words for a step ended by its node's failure (module docstring); group 1: the
#: node
NODE_FAILURE = re.compile(r"srun: error: Node failure on (\S+)")
#: what `SrunSteps.poll` reports for such a step (srun exits 0): a failure, as
#: `queries.exit_code` makes a NODE_FAIL batch job's "0:0"
LOST_CODE = 1
#: the most of a log read to find that line: its last bytes (never before srun's start),
#: where srun writes it as the step ends; a solver's output before it may be far longer
LOG_READ = 1 << 16


def aborted_text(job: str, words: str) -> str:
    """How step `job`, ended by Slurm as it launched (srun said `words`, slurmstepd
    nothing), is said: the cause is not known."""
    return (
        f"{job} was ended by Slurm as it launched (srun: '{words}'; no slurmstepd line "
        "says why): its step was cancelled, by a scancel of the step or of the allocation "
        "(yours or an administrator's) or the allocation's end, not by the study (it "
        f"cancels only the steps it stops) nor the solver's own failure; {NEXT}"
    )


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


def lost_text(job: str, node: str) -> str:
    """How step `job`, ended by the failure of its node `node`, is said."""
    return (
        f"{job} ended with the failure of node {node} (srun: 'Node failure on {node}': the "
        "node stopped answering the Slurm controller, which marked it down after its "
        "SlurmdTimeout), not the solver's own failure; srun exited 0, having heard of no "
        "task's end: counted as exit 1. Slurm ends the whole allocation with its node "
        "unless it was started with --no-kill (salloc/sbatch -k), which keeps the other "
        f"nodes for the steps that run again; sinfo -R names the node's reason; {NEXT}"
    )


#: srun's words for an allocation that has ended (module docstring); group 1: its job id
EXPIRED = re.compile(r"srun: error: Slurm job (\d+) has expired")


def allocation_ended(job: Job, log_from: int, allocation: str) -> str | None:
    """If `job`'s log says (past `log_from`) that `allocation`, the one the steps run in,
    has ended (`EXPIRED`): why no step can start any more and what to do, cut into lines
    of at most 100 columns (`log_lines.cut`: the study's error says it on the console,
    where it was one line of ~380 columns), else None."""
    text = _tail(job, log_from)
    found = None if text is None else EXPIRED.search(text)
    if found is None or found.group(1) != allocation:
        return None
    return "\n".join(cut(
        f"the allocation the simulations' steps run in (Slurm job {allocation}) has ended "
        f"(srun: 'Slurm job {allocation} has expired'): no step can start in it any more. "
        "Slurm ends an allocation at its time limit, at a scancel of it, or when one of "
        "its nodes fails unless it was started with --no-kill (salloc/sbatch -k); run the "
        "trainer again in a new allocation with --resume_from_checkpoint latest"
    ))  # fmt: skip


def _tail(job: Job, log_from: int) -> str | None:
    """The last `LOG_READ` bytes of `job`'s log past `log_from`, or None (no log)."""
    if job.log_path is None:
        return None
    try:
        with open(job.log_path, "rb") as log:
            size = log.seek(0, 2)
            log.seek(max(log_from, size - LOG_READ))
            return log.read(LOG_READ).decode(errors="replace")
    except OSError:
        return None


def _say(job: Job, said: str) -> None:
    """`said` in a WARNING and in `job`'s log (`log_lines.launcher_line`), each cut into
    lines of at most 100 columns (`log_lines.cut`: the console prints it as it is)."""
    logger.warning("%s", "\n".join(cut(said)))
    launcher_line(job.log_path, said)


def node_failure(job: Job, description: str, log_from: int) -> str | None:
    """If `job`'s log says (past `log_from`) that a node's failure ended its step
    (`NODE_FAILURE`), say so (`lost_text`, in a WARNING and in the log): the node, or
    None (no log, no such line)."""
    text = _tail(job, log_from)
    found = None if text is None else NODE_FAILURE.search(text)
    if found is None:
        return None
    _say(job, lost_text(description, found.group(1)))
    return found.group(1)


def said_end(job: Job, description: str, log_from: int, time_limit: str | None) -> str | None:
    """If `job`'s log says (in its last `LOG_READ` bytes, past `log_from`) that Slurm
    ended its step (slurmstepd's line, else srun's `ABORTED` words), say how in a
    WARNING and in the log; the text, or None (no log, no such line)."""
    text = _tail(job, log_from)
    if text is None:
        return None
    found = STEP_END.search(text)
    if found is not None and found.group(1) is None and OWN_KILL.search(text, 0, found.start()):
        return None  # (a rank's failure ended the step: the solver's own)
    if found is not None:
        said = end_text(description, found.group(1), time_limit)
    else:
        srun = next((m for m in (words.search(text) for words in ABORTED) if m), None)
        if srun is None:
            return None
        said = aborted_text(description, srun.group(0))
    _say(job, said)
    return said
