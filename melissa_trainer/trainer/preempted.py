"""How a preemption stop ends `OnlineTrainer.train()`: `Preempted`, the `SystemExit`
raised on every rank once the ranks stopped at one step with a checkpoint (or its save
failed, under ``on_save_error="continue"``), and its exit status (`exit_code`). The
signals, the launcher's watch and the stop's agreement are `preemption`'s."""

from __future__ import annotations

from melissa_trainer.common.setting import setting
from melissa_trainer.trainer.stop_cause import StopCause

__all__ = ["Preempted", "exit_code"]


def exit_code(signum: int) -> int:
    """128 + `signum`, what a shell reports for a process ended by that signal."""
    return 128 + int(signum)


class Preempted(SystemExit):
    """`OnlineTrainer.train()` stopped for a SIGTERM, a SIGINT or its launcher's death
    (`cause`), after a checkpoint.

    Raised on every rank, after the ranks stopped at the same step, wrote a checkpoint
    of that step (whatever `save_steps` says), stopped the simulations and fired the
    end hooks. Resume with ``resume_from_checkpoint='latest'`` (``--resume_from_checkpoint
    latest`` on the command line).

    A `SystemExit`, so that uncaught it ends the program without a traceback, with
    exit code ``128 + signum`` (143 for SIGTERM, 130 for SIGINT): what a process killed
    by that signal reports, so the shell (``$?``), Slurm's accounting, Kubernetes,
    systemd and torchrun ("exitcode 143, SIGTERM") read it as "ended by that signal"
    without learning a new code; and it is the code the second, forced signal exits
    with too, since in both cases resuming from ``latest`` is the next step. A job
    script decides to requeue from its own record of the signal rather than from the
    code, which ``accelerate launch`` turns into 1 (see the user guide,
    docs/how-to/preemption.md). `except Exception` does not catch it: catch `Preempted`
    (or `SystemExit`) to run code after a preemption.

    Attributes:
        signum: the signal; the same on every rank (SIGTERM if ranks got different ones,
            and when the launcher died).
        step: the `global_step` at which every rank stopped.
        checkpoint: the checkpoint written for it; None when its save failed and
            ``on_save_error="continue"`` went on (`resume_from`: what ``latest`` is then).
        resume_from: with no checkpoint of this step, the step of the last checkpoint
            written before it (None: none: a resume starts afresh).
        cause: why, the same on every rank (`StopCause`: the signal, or the launcher's
            death); `StopCause(signum)` when not given.
    """

    def __init__(
        self,
        signum: int,
        step: int,
        checkpoint: str | None,
        cause: StopCause | None = None,
        resume_from: int | None = None,
    ) -> None:
        super().__init__(exit_code(signum))
        self.signum = int(signum)
        self.step = step
        self.checkpoint = checkpoint
        self.resume_from = resume_from
        self.cause = StopCause(self.signum) if cause is None else cause

    def __str__(self) -> str:
        cause, step = self.cause, self.step
        said = (
            f"stopped at step {step} because {cause}"
            if cause.launcher
            else f"preempted by {cause} at step {step}"
        )
        again = "the same command and " if cause.launcher else ""  # (a launch is needed)
        resume = setting("resume_from_checkpoint", "latest")
        if self.checkpoint is not None:
            return f"{said}; checkpoint {self.checkpoint}; resume with {again}{resume}"
        # (its save failed and on_save_error="continue" went on: never name a path that
        # was not written)
        earlier = (
            f"resume with {again}{resume} starts from step {self.resume_from}, the last "
            "checkpoint written"
            if self.resume_from
            else "no earlier checkpoint: a resume starts afresh"
        )
        return f"{said}; its checkpoint could not be written (see the error above); {earlier}"
