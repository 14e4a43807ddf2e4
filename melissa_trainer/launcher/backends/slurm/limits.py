"""What the cluster's configuration says of the backend's options (`partition`,
`time_limit`, `extra_args`), in the user's words, when the cluster does not take them.

Two ways a value the cluster does not take shows:

- **Refused at submission.** sbatch refuses a partition the cluster lacks ("invalid
  partition specified"): the launcher stops the study at that first submission, and
  `partition_hint` adds the partitions ``sinfo`` lists and the option that names one.
- **Accepted, then never started.** Under ``EnforcePartLimits=NO`` (Slurm's default), sbatch
  accepts a job whose request is over a limit of its partition, association or QOS (a
  `time_limit` above the partition's ``MaxTime``, say) and the job waits ``PENDING``
  with that reason (``PartitionTimeLimit``) until the limit or the job changes: never,
  for an unattended study. The study waits for queued jobs (their start-up allowance
  has not begun), and the queue notice gave the bare reason: a study that never started
  anything, and said nothing of why (found in a user trial on the one-node test
  cluster, ``MaxTime=10`` and ``time_limit="00:30:00"``). `OverLimit` says it in a
  WARNING, once per reason for the backend (every job of the study has the same
  request), naming the option and the fix; `over_limit_reason` names it in the
  queue notice.
"""

from __future__ import annotations

import logging

from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands

__all__ = ["OVER_LIMIT", "OverLimit", "over_limit_reason", "partition_hint"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

_TIME = "its time limit (--time: SlurmBackend's time_limit, or the partition's DefaultTime)"
#: squeue's reasons (``%r``) of a PENDING job over a limit, which keeps it from ever
#: starting as it was submitted: what is over which limit, and where the limit is shown
OVER_LIMIT = {
    "PartitionTimeLimit": (
        f"{_TIME} is above its partition's MaxTime (sinfo -o '%P %l', or scontrol show "
        "partition, shows it)"
    ),
    "AssocMaxWallDurationPerJobLimit": (
        f"{_TIME} is above the MaxWall of your association (sacctmgr show assoc "
        "where user=$USER format=account,partition,maxwall)"
    ),
    "QOSMaxWallDurationPerJobLimit": (
        f"{_TIME} is above the MaxWall of its QOS (sacctmgr show qos format=name,maxwall)"
    ),
    "PartitionNodeLimit": (
        "the nodes it asks for are outside its partition's MinNodes/MaxNodes, or the "
        "nodes it needs are DOWN or DRAINED (scontrol show partition; sinfo -R)"
    ),
}


def over_limit_reason(reason: str | None) -> str | None:
    """`reason` as a queue notice names it when it is over a limit (`OVER_LIMIT`);
    None for any other reason (the caller says it otherwise)."""
    if reason not in OVER_LIMIT:
        return None
    return f"{reason}: over a limit, it never starts as submitted (a WARNING says the fix)"


class OverLimit:
    """Says, once per reason, that a job of this backend waits over a limit
    (module docstring). `time_limit` is the backend's (normalized; None: none given)."""

    def __init__(self, time_limit: str | None) -> None:
        self.time_limit = time_limit
        self.said: set[str] = set()

    def see(self, job: str, job_id: str, state: str | None, reason: str | None) -> str | None:
        """The WARNING's text if squeue's answer (`state`, `reason`) of the job `job`
        (its description; `job_id` its Slurm id) is the first of this backend over the
        limit `reason`, said now; else None (said already, or not over a limit)."""
        if state != "PENDING" or reason not in OVER_LIMIT or reason in self.said:
            return None
        self.said.add(reason)
        given = (
            "None (the partition's DefaultTime, or a --time of extra_args or SBATCH_TIMELIMIT)"
            if self.time_limit is None
            else f"'{self.time_limit}' (--time={self.time_limit})"
        )
        text = (
            f"{job} waits in Slurm's queue over a limit (squeue: PENDING, {reason}): "
            f"{OVER_LIMIT[reason]}. Slurm accepted it (EnforcePartLimits=NO) but does not "
            "start it, nor any job of this study with the same request, while that limit "
            f"stands: the study waits for them. SlurmBackend's time_limit is {given}: "
            "give the backend options that fit the limit (time_limit, partition, "
            "extra_args), then stop the study and resume it; or, for the jobs already "
            f"queued, scontrol update JobId={job_id} TimeLimit=... (a user may lower it). "
            "Said once for this reason"
        )
        logger.warning("%s", text)
        return text


def partition_hint(commands: SlurmCommands, why: str | None) -> str:
    """For sbatch's "invalid partition": the partitions this cluster has and the option
    that names one (a partition name copied from another site's guide is the usual
    cause); empty for any other refusal, or when sinfo cannot say."""
    if why is None or "invalid partition" not in why.lower():
        return ""
    partitions = commands.partitions()
    if not partitions:
        return ""
    return (
        f"\nthis cluster's partitions (sinfo; * marks the default): {', '.join(partitions)}: "
        "name one with SlurmBackend(partition=...), or leave partition=None for the default"
    )
