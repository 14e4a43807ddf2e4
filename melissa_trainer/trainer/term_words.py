"""What a rank says as a first stop signal arrives (`PreemptionHandler`): that it stops
at the next stop synchronisation to write a checkpoint, and how to resume should it be
killed before that checkpoint is written; or, once the loop has ended (a late signal),
that nothing is left to stop, and where the end's checkpoint stands (`late_words`; that
clause decided once, alike on every rank: `late_end`).

Found in a user trial on the two-node test cluster (an ``sbatch --no-requeue`` trainer
whose allocation lost a node, `tests/launcher/backends/test_slurm_srun_sbatch_requeue.py`):
Slurm sent the job SIGTERM, then SIGKILL after its ``KillWait``, before the stop's
checkpoint was written, and the log's last line was this one, which said nothing of how
to resume. It now names the latest checkpoint on disk (the one a resume takes if the
stop's own never comes) and the resume flag.
"""

from __future__ import annotations

from pathlib import Path

from melissa_trainer.common.checkpoint_names import latest_checkpoint
from melissa_trainer.common.setting import setting

__all__ = ["late_words", "stop_requested_words"]


def stop_requested_words(name: str, repeat_window: float, checkpoints: Path | None) -> str:
    """The WARNING line of a first stop signal `name` ("SIGTERM"): the stop to come, the
    `repeat_window` after which the signal again exits at once, and, where the trainer's
    checkpoint folder `checkpoints` is known, what a resume takes if this process is
    killed first (the latest checkpoint under it, or none yet: a fresh start)."""
    words = (
        f"{name} received: stopping at the next stop synchronisation to write a checkpoint "
        f"(send it again, {repeat_window:g} s or more from now, to exit at once without one)"
    )
    if checkpoints is None:
        return words
    latest = latest_checkpoint(checkpoints)
    if latest is None:
        return f"{words}; killed before it is written: no checkpoint is on disk yet, run it again"
    resume = setting("resume_from_checkpoint", "latest")
    killed = "killed before it is written (a SIGKILL: Slurm's, KillWait after its SIGTERM)"
    return f"{words}; {killed}, resume from {latest} with {resume}"


def late_words(cause: str, status: int, end: str, *, after_sync: bool) -> str:
    """The WARNING line of a stop signal that came once no stop could be agreed on any
    more: `cause` ("SIGTERM"), `status` the exit status it ends the process with, `end`
    what it says of the end's checkpoint (`late_end.EndCheckpoint.clause`); `after_sync`:
    caught in the last window, after the last stop synchronisation, and said again as
    the loop ends (its first line promised a stop to come), else received after the
    loop ended."""
    if after_sync:
        came = f"{cause} came after the last stop synchronisation"
        ends = "the run ends as without it (not as said above)"
    else:
        came, ends = f"{cause} received after the end of training", "the run ends as without it"
    return (
        f"{came}: no step is left to stop at, {ends}, then this process ends as the signal "
        f"asks (exit status {status}) as train() returns{end}"
    )
