"""The words of `core.wait_watch.WaitWatch`'s warnings: each watched collective's usual
cause of a long wait (``*_USUAL``, passed as `WaitWatch.waiting`'s `usual`), what a rank
held in a hook does to the others (`IN_HOOK`), how to find the rank that holds them
(`WHAT_TO_DO`) and how a wait ends if none comes (`GROUP_TIMEOUT_ENDS`).

Contract: plain sentences, no state and no imports; each names what the user can check,
and every ``*_USUAL`` says whether its cause is harmless. They still import from
`melissa_trainer.core.wait_watch`.
"""

from __future__ import annotations

__all__ = [
    "AGREEMENT_USUAL",
    "CHECKPOINT_USUAL",
    "EVAL_USUAL",
    "GROUP_TIMEOUT_ENDS",
    "IN_HOOK",
    "LAST_STEPS_USUAL",
    "LOCK_USUAL",
    "RESUME_GATHER_USUAL",
    "SOURCES_USUAL",
    "STALLED_USUAL",
    "STEPS_USUAL",
    "UNTRAINED_USUAL",
    "WHAT_TO_DO",
]

#: the usual, harmless cause of a long wait at the stop agreement (`waiting`'s default)
AGREEMENT_USUAL = (
    "A rank still waiting for its data (a slow or queued simulation: its own log says so) "
    "is the usual cause and harmless"
)
#: the usual cause of a long wait at a checkpoint's collectives (its save or its load)
CHECKPOINT_USUAL = (
    "A rank still writing or reading its checkpoint files (a slow or busy file system) "
    "is the usual cause"
)
#: the usual cause of a long wait at a collective among a window's steps (a log's figures,
#: the wall-clock budget's agreement, the per-simulation losses' reduction): on a GPU the
#: host first waits there for the peers' steps, so for a peer still waiting for its data
#: (taken before its window's steps)
STEPS_USUAL = (
    "A rank still waiting for its data (a slow or queued simulation: its own log says so) "
    "or still running its steps is the usual cause and harmless"
)
#: the usual cause of a long wait at a validation's collectives
EVAL_USUAL = (
    "A rank still evaluating its share of eval_dataset (or its hooks' eval_figures), or "
    "still waiting for its data before the steps that came first, is the usual cause"
)
#: the usual cause of a long wait at the output lock's broadcast, as the trainer is made
#: (`trainer.lock_share`): rank 0 waits there for a trainer stopping in output_dir, or a
#: rank has not finished building its trainer (what comes before: its eval_dataset's
#: ingest transform, its buffer)
LOCK_USUAL = (
    "Rank 0 still taking output_dir's lock (it waits up to 120 s for a trainer that is "
    "stopping there: its log says so), or a rank still building its trainer (its "
    "eval_dataset's ingest transform, its buffer), is the usual cause"
)
#: the usual cause of a long wait at the barrier once every rank's source started
SOURCES_USUAL = (
    "A rank still loading its checkpoint or starting its source (its receiver, a "
    "study's start) is the usual cause"
)
#: the usual cause of a long wait at a resumed study's gather of the simulations
#: complete on every rank, which follows that barrier with nothing long in between
RESUME_GATHER_USUAL = (
    "Every rank had started its source just before (a barrier): a rank still listing "
    "the simulations its receiver completed, or slowed by a busy host, is the only "
    "harmless cause"
)
#: the usual cause of a long wait at the loss check after the loop: on a GPU the host
#: waits there for the last window's steps it queued
LAST_STEPS_USUAL = (
    "A rank still running the last window's steps (on a GPU the host waits here for "
    "the steps it queued) is the usual cause and harmless"
)
#: the usual cause of a long wait at the gather of a run that trained nothing, which
#: follows the ranks' agreement that the stream ended, with only the loss check between
UNTRAINED_USUAL = (
    "Every rank had agreed just before that the stream ended before a first step: a "
    "rank slowed by a busy host is the only harmless cause"
)
#: what a rank that completes no step of a window may wait for, and the usual cause
#: (`WaitWatch.stepping`): on gloo the host waits in DDP's backward for every rank
STALLED_USUAL = (
    "it may wait in its step's collectives (DDP's backward all-reduce: on a CPU run the "
    "host waits there for every rank's same step) for another rank that has not reached "
    "them. A step much slower than those before (a hook's work in it, a recompile) is "
    "the usual cause"
)
#: what a rank held in a hook method for long does to the others (`WaitWatch.stepping`)
IN_HOOK = (
    "which holds every other rank at its next collective: a hook slow on one rank, or "
    "one that waits for what never comes (a collective that not every rank calls, a "
    "lock, a process); do its work less often, on every rank alike, or after train()"
)
#: how to find the rank that holds the others, and what happens if none comes
WHAT_TO_DO = (
    "otherwise check for a stopped (SIGSTOP, a debugger) or hung rank, or a long save or "
    "load on another rank. Every rank that waits says so: the late ones are those that do "
    "not; the ranks' processes in state T (`ps -o pid,stat,args`) are "
    "stopped (`kill -CONT PID` resumes one), a hung one's stack shows with `py-spy dump "
    "--pid PID`"
)
#: how a watched collective's wait ends if no rank comes (`WaitWatch`'s `ends` default)
GROUP_TIMEOUT_ENDS = (
    "The wait ends with an error only at the process group's timeout (torch's default "
    "30 min; InitProcessGroupKwargs(timeout=...))"
)
