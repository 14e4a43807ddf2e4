"""What a rank says as a first stop signal arrives (`PreemptionHandler`): that it stops
at the next stop synchronisation to write a checkpoint, and how to resume should it be
killed before that checkpoint is written; or, once the loop has ended (a late signal),
that nothing is left to stop, and, where it is so, that no checkpoint of the end comes
(`late_words`, `end_checkpoint_words`: decided as the line is said).

Found in a user trial on the two-node test cluster (an ``sbatch --no-requeue`` trainer
whose allocation lost a node, `tests/launcher/backends/test_slurm_srun_sbatch_requeue.py`):
Slurm sent the job SIGTERM, then SIGKILL after its ``KillWait``, before the stop's
checkpoint was written, and the log's last line was this one, which said nothing of how
to resume. It now names the latest checkpoint on disk (the one a resume takes if the
stop's own never comes) and the resume flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.checkpoint.paths import latest_checkpoint
from melissa_trainer.common.setting import setting

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["end_checkpoint_words", "late_words", "no_end_checkpoint", "stop_requested_words"]


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


def no_end_checkpoint(save_at_end: bool, save_seconds: float | None, end_saved: bool) -> str:
    """What a late signal's line adds about the end's checkpoint: "" with `save_at_end`
    (it comes) or `end_saved` (the last step's checkpoint is written, being written, or
    asked for: `end_checkpoint_words`); else that the end writes none (a resume starts
    from an earlier one, or afresh), or with `save_seconds` set, none unless the timed
    one is due then (`hooks.flow`: the end saves when either asks)."""
    if save_at_end or end_saved:
        return ""
    unless = "" if save_seconds is None else f" unless the one every {save_seconds:g} s is due"
    return (
        f"; save_at_end is off: no checkpoint is written at the end{unless} (a resume "
        "starts from the last one written before, or afresh)"
    )


def end_checkpoint_words(trainer: TrainerView) -> str:
    """`no_end_checkpoint` of `trainer` as things stand when a late signal is said (read
    then, not at the start: a ``save_steps`` or timed save, or a hook's, may make the last
    step's checkpoint whatever ``save_at_end`` says). The end's checkpoint is there when
    the last save's step is the last step (`checkpointing`: set as the save starts), or
    comes when a save is asked for and not yet begun (``should_save``, or kept for the
    ranks' agreement in ``asked``: performed at LOOP_END's action point at the latest).
    Read from the signal watcher's thread: flags and integers only, nothing changed."""
    state, control = trainer.state, trainer.control
    saved = state.last_save_step is not None and state.last_save_step == state.global_step
    asked = control.should_save or "should_save" in control.asked
    args = trainer.args
    return no_end_checkpoint(args.save_at_end, args.save_seconds, saved or asked)


def late_words(cause: str, status: int, end: str, *, after_sync: bool) -> str:
    """The WARNING line of a stop signal that came once no stop could be agreed on any
    more: `cause` ("SIGTERM"), `status` the exit status it ends the process with, `end`
    what `no_end_checkpoint` said; `after_sync`: caught in the last window, after the last
    stop synchronisation, and said again as the loop ends (its first line promised a stop
    to come), else received after the loop ended."""
    if after_sync:
        came = f"{cause} came after the last stop synchronisation"
        ends = "the run ends as without it (not as said above)"
    else:
        came, ends = f"{cause} received after the end of training", "the run ends as without it"
    return (
        f"{came}: no step is left to stop at, {ends}, then this process ends as the signal "
        f"asks (exit status {status}) as train() returns{end}"
    )
