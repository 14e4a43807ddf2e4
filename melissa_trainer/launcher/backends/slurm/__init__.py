"""The Slurm backend, one module per responsibility:

* `backend`: `SlurmBackend`, which checks the options and hands each call to its mode;
* `batch`: ``mode="sbatch"``, each job a batch job (scripts, squeue polling, exit codes,
  kill);
* `exit_code`: where a batch job's exit code comes from (its exit file, sacct,
  scontrol, its final state);
* `node_failures`: the nodes that failed ``exclude_after`` attempts in a row, left out
  of the batch jobs submitted later (``sbatch --exclude``);
* `steps`: ``mode="srun"``, each job a step of the current allocation;
* `segments`: MPICH's /dev/shm segments of the batch jobs that ran on this host, removed
  once they ended;
* `queued_end`: what is said of a batch job cancelled while still queued, or ended
  while running by Slurm (its time limit) or someone's scancel;
* `commands`: running Slurm's commands (timeouts, failures);
* `script`: the batch scripts and job steps, pure functions;
* `queries`: what Slurm is asked of a job, pure functions: the ``sbatch``, ``squeue``,
  ``sacct``, ``scontrol`` and ``scancel`` command lines, their parsers, the job states.
"""

from __future__ import annotations

from melissa_trainer.launcher.backends.slurm.backend import SlurmBackend
from melissa_trainer.launcher.backends.slurm.batch import CLOSE_GRACE, FORCE_WAIT
from melissa_trainer.launcher.backends.slurm.commands import COMMAND_TIMEOUT
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.srun_handle import SrunHandle

__all__ = [
    "CLOSE_GRACE",
    "COMMAND_TIMEOUT",
    "FORCE_WAIT",
    "SlurmBackend",
    "SlurmHandle",
    "SrunHandle",
]
