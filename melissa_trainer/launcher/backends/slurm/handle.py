"""What `BatchJobs` (mode "sbatch" of `SlurmBackend`) knows of one submitted batch job:
its Slurm job id, the files its script writes, what squeue last said of it (state, reason,
node) and how it ended (exit code, final state, whether this backend cancelled it).

Its own module so that the modules that read a job's end (`exit_code`, `queued_end`,
`node_failures`) need not import `batch`, which imports them; `batch` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from melissa_trainer.launcher.backends.base import Handle, Job

__all__ = ["SlurmHandle"]


@dataclass(eq=False)
class SlurmHandle(Handle):
    """A submitted batch job (``mode="sbatch"``)."""

    job: Job
    job_id: str
    exit_stem: str
    state: str | None = None  # last state squeue gave; None: not listed (yet, or any more)
    reason: str | None = None  # why squeue said it was PENDING (``%r``), if it said
    queried: bool = False  # squeue has answered at least once since the submission
    code: int | None = None  # exit code once the job has ended
    stale: bool = False  # a job of an earlier run of the study (see begin_study)
    ran: bool = False  # squeue listed it started (`STARTED_STATES`) at least once
    # squeue last listed it PENDING after it had started (requeued), not started since:
    # `ran` stays true from the first run, but its end may come in the queue (`queued_end`)
    queued_again: bool = False
    cancelled: bool = False  # this backend cancelled it (kill, close, begin_study)
    final: str | None = None  # its final state, as squeue or the record gave it
    began: str | None = None  # the file its script writes as it begins (`job_files`)
    recancelled: bool = False  # cancelled again, back in the queue (`BatchJobs._requeued`)
    node: str | None = None  # where squeue last listed it started (%N; `node_failures`)
    # the squeue answers (`BatchJobs`' count of them) that first listed it started, and
    # ended or gone: which jobs one node-down event ended (`node_failures`)
    seen_started: int | None = None
    seen_ended: int | None = None
    # the last squeue answer that listed it RUNNING: a job listed so by the answer that
    # listed a node-down's jobs ended was alive after that down (COMPLETING is a job
    # ending, its node's health unknown: no proof it outlived the down)
    last_running: int | None = None
