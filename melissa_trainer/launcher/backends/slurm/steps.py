"""Mode "srun" of `SlurmBackend`: each job an ``srun`` step of the current allocation.

The trainer runs inside an allocation (``salloc``, or a batch job). Each job is ``srun
--ntasks=N --exclusive --job-name=NAME ...`` (`script.srun_command`) run as a
local process by `LocalBackend`: same process group, PR_SET_PDEATHSIG and kill
semantics, so steps die with the trainer and with the allocation. After a kill the
step is also ``scancel``-ed by name, in case the srun process was killed before it
could end its tasks.

A step this backend killed never reports success. srun's exit status is its tasks'
(the highest exit code, or 128 + the signal that ended one), and srun turns the SIGTERM
of a kill into a SIGKILL of its tasks ("forcing job termination"), so a killed step
normally reports 137. But srun waits only a few seconds (KillWait + 2) for the tasks'
exit to be reported; past that ("Timed out waiting for job step to complete": a
slurmstepd slow to answer, on a loaded node, or a step aborted before its launch was
complete) it exits with 0, having heard of no task. That 0 says nothing about the job:
`poll` reports `KILLED` for it instead.

Used from the backend's one thread.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from melissa_trainer.launcher.backends.base import Handle, Job
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss
from melissa_trainer.launcher.backends.slurm.commands import SlurmCommands, failure

__all__ = ["SrunHandle", "SrunSteps"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: what `SrunSteps.poll` reports for a step it killed whose srun exited with 0 (see the
#: module docstring): srun's own code for tasks it ended with SIGKILL
KILLED = 128 + signal.SIGKILL


@dataclass(eq=False)
class SrunHandle(Handle):
    """A job step run by a local ``srun`` process."""

    job: Job
    process: Handle  # LocalBackend's handle of the srun process
    step_name: str  # the step's Slurm name (``--job-name``)
    killed: bool = False  # `SrunSteps.kill` signalled its srun while it ran


class SrunSteps:
    """The steps of one backend in the allocation `allocation` (its job id)."""

    def __init__(
        self,
        commands: SlurmCommands,
        allocation: str,
        time_limit: str | None,
        srun_args: Sequence[str],
    ) -> None:
        self._commands, self._allocation = commands, allocation
        self._time_limit, self._srun_args = time_limit, tuple(srun_args)
        # srun passes its environment on to the step's tasks, on nodes where the trainer
        # is not: the srun process is started as the trainer is, nothing changed
        self._local = LocalBackend(placement=None)
        self._running: list[SrunHandle] = []  # steps not known ended

    def launch(self, job: Job, step_name: str) -> SrunHandle:
        """Start the srun process of `job`, its step named `step_name`; at once."""
        argv = ss.srun_command(
            name=step_name,
            argv=job.argv,
            ranks=job.ranks,
            time_limit=self._time_limit,
            srun_args=self._srun_args,
            srun=self._commands.path("srun"),
        )
        # the local backend sees one process (srun), which starts the ranks itself
        process = self._local.launch(dataclasses.replace(job, argv=argv, ranks=1))
        step = SrunHandle(job=job, process=process, step_name=step_name)
        self._running.append(step)
        return step

    def poll(self, step: SrunHandle) -> int | None:
        """None while srun runs, else its exit code; `KILLED` for a step that `kill`
        ended whose srun exited with 0 (it heard of no task's end: module docstring)."""
        code = self._local.poll(step.process)
        if code is not None and step in self._running:
            self._running.remove(step)
        if code == 0 and step.killed:
            return KILLED
        return code

    def kill(self, step: SrunHandle, grace: float) -> None:
        if step in self._running:  # still running: its step may outlive srun
            self._running.remove(step)
            # (an srun that had ended on its own keeps its code: it was not killed)
            step.killed = self._local.poll(step.process) is None
            self._local.kill(step.process, grace)
            self.cancel({step.step_name}.__contains__)

    def close(self) -> None:
        names = {step.step_name for step in self._running}
        self._running.clear()
        self._local.close()
        if names:
            self.cancel(names.__contains__)

    def describe(self, step: SrunHandle) -> str:
        return f"{self._local.describe(step.process)} (srun step {step.step_name})"

    def cancel(self, match: Callable[[str], bool]) -> None:
        """scancel the steps of the allocation whose name `match`-es, logging them."""
        squeue = self._commands.path("squeue")
        result = self._commands.run([squeue, "-h", "-s", "-j", self._allocation, "-o", "%i|%j"])
        why = failure(result)
        if why is not None or isinstance(result, str):
            logger.warning("cannot list the steps of job %s: %s", self._allocation, why)
            return
        steps = [
            step_id
            for step_id, name in sq.parse_squeue(result.stdout).items()
            if match(name) and "." in step_id
        ]
        if steps:
            logger.info(
                "cancelling steps (of killed srun processes, or of an earlier run): %s", steps
            )
            self._commands.run([self._commands.path("scancel"), *steps])
