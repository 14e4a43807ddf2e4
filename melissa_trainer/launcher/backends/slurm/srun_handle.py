"""The handle of one job of mode "srun" (`steps.SrunSteps`): the step's local srun
process and what the backend learnt of the step."""

from __future__ import annotations

from dataclasses import dataclass

from melissa_trainer.launcher.backends.base import Handle, Job

__all__ = ["SrunHandle"]


@dataclass(eq=False)
class SrunHandle(Handle):
    """A job step run by a local ``srun`` process."""

    job: Job
    process: Handle  # LocalBackend's handle of the srun process
    step_name: str  # the step's Slurm name (``--job-name``)
    killed: bool = False  # `SrunSteps.kill` signalled its srun while it ran
    step_id: int | None = None  # its id in the allocation, once squeue has listed it
    floor: int = 0  # the lowest id it can have: above every id listed before its launch
    log_from: int = 0  # the size of the job's log at its srun's start
    retry_at: float | None = None  # while it waits out an outage: when srun runs again
    outage: tuple[float, float] | None = None  # (first srun outage end, retries' deadline)
    delay: float = 1.0  # the wait before the next run of srun in an outage
    tries: int = 1  # srun processes started for it
    lost: str | None = None  # the node whose failure ended it, as srun said (`step_end`)
