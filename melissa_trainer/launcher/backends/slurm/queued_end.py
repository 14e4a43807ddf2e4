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
(CANCELLED; one that Slurm had requeued and that was cancelled back in the queue:
`requeued_text`, not "while running"). `queued_end` says it in the job's log and, for
a cancellation that is not the study's own (`SlurmHandle.cancelled`: its kill, its
close, `begin_study`), in a warning on the console, just before the launcher's line
about the failed attempt: who cancelled it (the study, or someone's ``scancel``), and
what the launcher does next (it counts as a failed attempt: a restart while some are
left, else the failure policy). A preemption (PREEMPTED) and a node's failure
(NODE_FAIL) are said alike.

A job that waits because of someone, not of the queue's load, is said once in a warning
as squeue shows it (`queue_words`): held (``JobHeldUser``, ``JobHeldAdmin``: the fix,
``scontrol release``, named; `held_reason` names it in the queue notice too), suspended,
requeued after it started, or in a state this backend does not know. The study waits
for such a job (its start-up allowance has not begun): the warning is what keeps that
wait from being silent.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING

from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.log_lines import cut, launcher_line

if TYPE_CHECKING:  # (annotations only)
    from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

__all__ = [
    "HELD",
    "KNOWN",
    "PAUSED",
    "expected_start",
    "held_reason",
    "queue_words",
    "queued_end",
    "queued_text",
    "requeued_text",
]

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


def requeued_text(job: str) -> str:
    """How a job `job` that ran, that Slurm requeued, and that someone cancelled while
    squeue last listed it queued again (`SlurmHandle.queued_again`) is said: not "while
    running" (its `SlurmHandle.ran` is its first run's). Only what is known: it may have
    started again and been cancelled within one poll."""
    return (
        f"{job} was cancelled after Slurm requeued it, while queued again or just as it "
        "started again (squeue listed it back in the queue after it had run, then "
        "CANCELLED), not by the study (it cancels only the jobs it stops): by a scancel, "
        f"yours or an administrator's; {NEXT}"
    )


def running_text(job: str, final: str, time_limit: str | None) -> str | None:
    """How a job `job` that ran and that Slurm, not the study, ended in state `final` is
    said: its time limit (``TIMEOUT``; `time_limit`, the backend's, None: the partition's
    default or an ``extra_args`` ``--time``), a preemption (``PREEMPTED``), its node's
    failure (``NODE_FAIL``), or a scancel (``CANCELLED``); None for any other final
    state (the solver's own end: its exit code says it)."""
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
    if final == "PREEMPTED":
        return (
            f"{job} was preempted (squeue: PREEMPTED): Slurm ended it for a job of higher "
            "priority (the partition's PreemptMode; a requeueing mode puts it back in the "
            f"queue instead), not the solver's own failure; {NEXT}"
        )
    if final == "NODE_FAIL":
        return (
            f"{job} ended with its node's failure (squeue: NODE_FAIL: a node of the job "
            "stopped answering the controller), not the solver's own failure; Slurm did not "
            "requeue it (JobRequeue=0, or sbatch --no-requeue); sinfo -R names the node's "
            f"reason; {NEXT}"
        )
    if final == "CANCELLED":
        return (
            f"{job} was cancelled while running (squeue: CANCELLED), not by the study (it "
            f"cancels only the jobs it stops): by a scancel, yours or an administrator's, or by "
            f"its lease (a trainer that stopped renewing it for lease_timeout); {NEXT}"
        )
    return None


def queued_end(handle: SlurmHandle, job: str, time_limit: str | None = None) -> str | None:
    """If `handle`'s job ended before it was seen started (module docstring), say so in its
    log (`log_lines.launcher_line`) and, unless the study cancelled it, in a warning; likewise
    a job that ran and that Slurm ended, not the study (`running_text`: its time limit,
    someone's scancel; `requeued_text`: a scancel after a requeue, back in the queue),
    each cut into lines of at most 100 columns (`log_lines.cut`).
    The text (one line), or None for a job that ended otherwise, or a job of an earlier
    run (not the launcher's). A log that cannot be written is said in a warning."""
    if handle.stale or handle.final is None:
        return None
    if handle.ran:
        if handle.cancelled:
            return None
        requeued = handle.queued_again and handle.final == "CANCELLED"
        said = requeued_text(job) if requeued else running_text(job, handle.final, time_limit)
        if said is None:
            return None
        text = said
    elif handle.final != "CANCELLED":
        return None
    else:
        text = queued_text(job, handle.cancelled)
    if handle.cancelled:
        logger.debug("%s", "\n".join(cut(text)))
    else:
        _warn(text)
    launcher_line(handle.job.log_path, text)  # (a log that cannot be written: a warning)
    return text


#: squeue's reasons (``%r``) of a job held in the queue: it waits, never starting, until
#: someone releases it; who may release it
HELD = {
    "JobHeldUser": "held by its user (sbatch --hold, scontrol uhold): scontrol release",
    "JobHeldAdmin": (
        "held by an administrator (scontrol hold as root or SlurmUser): only an "
        "administrator's scontrol release"
    ),
}


def held_reason(reason: str | None) -> str | None:
    """`reason` (squeue's, of a PENDING job) as a queue notice names it: a hold (`HELD`)
    with its fix, any other reason as it is."""
    if reason in HELD:
        return f"{reason}: a hold, it never starts until released (scontrol release JOBID)"
    return reason


#: squeue's states of a job that holds still, neither queued nor running, until someone
#: resumes it (``scontrol suspend``, or a preemption with PreemptMode=SUSPEND)
PAUSED = {"SUSPENDED": "scontrol resume", "STOPPED": "scontrol resume"}
#: states of a job held as it is requeued, or by its reservation's deletion
HELD_STATES = frozenset({"REQUEUE_HOLD", "RESV_DEL_HOLD"})
#: every state this backend knows the meaning of (`queries`' and these): any other is
#: said once, not guessed at
KNOWN = (
    sq.STARTED_STATES
    | sq.TERMINAL_STATES
    | HELD_STATES
    | set(PAUSED)
    | {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "RESIZING", "POWER_UP_NODE"}
    | {"UPDATE_DB"}
)


def expected_start(start: str | None, reason: str | None) -> str:
    """Words for when a requeued job should start again (`start`: squeue's ``%S``,
    ``2026-12-05T23:25:37``, in this machine's time zone as squeue prints it), or ""
    where Slurm gave none or it cannot be read. A requeue found its job waiting silently
    for its BeginTime (a user trial on the two-node test cluster): Slurm holds a requeued
    batch job until the credential of its first run has expired (``AuthInfo``'s
    ``cred_expire``, 120 s by default), whatever the free CPUs."""
    if start is None:
        return ""
    try:
        when = datetime.datetime.strptime(start, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return ""
    left = max(0, round((when - datetime.datetime.now()).total_seconds()))
    why = (
        ": Slurm holds a requeued batch job until its BeginTime, its first run's "
        "credential expired (AuthInfo cred_expire, 120 s by default)"
        if reason == "BeginTime"
        else ""
    )
    return f"; Slurm expects to start it at {start} (squeue's StartTime, in about {left} s{why})"


def queue_words(
    handle: SlurmHandle, job: str, state: str | None, reason: str | None, start: str | None = None
) -> None:
    """Say, in a WARNING, what squeue's new answer (`state`, `reason`) tells of `handle`'s
    job (`job`: its description) that the study did not cancel, once each time it comes
    (not at each answer): held in the queue (a reason of `HELD`, a state of
    `HELD_STATES`), put back in the queue after it started (requeued: PENDING again
    after a started state, naming the node it last ran on, `SlurmHandle.node`; when
    Slurm expects to start it again, from `start`, squeue's ``%S``: `expected_start`),
    suspended (`PAUSED`), or a state this backend does not know
    (`KNOWN`: it counts as alive, not started). A job the study cancelled is not said
    (`BatchJobs._requeued` cancels it again). The study waits for such a job: said,
    it does not wait silently."""
    if handle.cancelled or handle.stale or state is None:
        return
    new, job_id = state != handle.state, handle.job_id
    if new and state not in KNOWN:
        _warn(
            f"{job} is in a Slurm state this backend does not know (squeue: {state}): it "
            "counts as alive and not started, and the study waits for it; scancel "
            f"{job_id} to give it up"
        )
    if new and (state in PAUSED or state in HELD_STATES):
        fix = PAUSED.get(state, "scontrol release")
        _warn(
            f"{job} is {'suspended' if state in PAUSED else 'held'} (squeue: {state}): it "
            f"does not run until someone runs {fix} {job_id}, and the study waits for it "
            f"meanwhile; scancel {job_id} to give it up"
        )
    if state != "PENDING":
        return
    if handle.state in HELD_STATES and reason in HELD:
        return  # (the hold as it was requeued, said at that state: the same fact)
    held = reason in HELD and handle.reason != reason
    if handle.ran and new and held:  # (one event, scontrol requeuehold: one line)
        _warn(
            f"{job} was put back in Slurm's queue after it started and is held there "
            f"(requeued held, as by scontrol requeuehold; squeue: PENDING, {reason}: "
            f"{HELD[reason or '']} {job_id}): it does not start until released, then runs "
            "again from the start, and the study waits for it meanwhile; scancel "
            f"{job_id} to give it up"
        )
        return
    if handle.ran and new:
        node = "" if handle.node is None else f" on node {handle.node}"
        _warn(
            f"{job} was put back in Slurm's queue after it started{node} (requeued: "
            "scontrol requeue, a preemption or a node failure; squeue: PENDING, "
            f"{reason or 'no reason given'}): it runs again from the start when Slurm "
            "starts it, the same attempt (no restart counted, nor a failure of the node), "
            f"and counts as queued meanwhile{expected_start(start, reason)}"
        )
    if held:
        _warn(
            f"{job} is held in Slurm's queue (squeue: PENDING, {reason}: "
            f"{HELD[reason or '']} {job_id}): it does not start until released, and the "
            "study waits for it meanwhile (a queued job's start-up allowance has not "
            f"begun); scancel {job_id} to give it up"
        )


def _warn(text: str) -> None:
    """`text` in a WARNING cut into lines of at most 100 columns (`log_lines.cut`: the
    console prints a WARNING as it is; these were one line of ~200 to ~590 columns)."""
    logger.warning("%s", "\n".join(cut(text)))
