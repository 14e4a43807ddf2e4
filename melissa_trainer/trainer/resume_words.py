"""What an ERROR line of a failure says a resume does: the checkpoint written at the
failure, or why none was and the latest one to resume from (with
``--resume_from_checkpoint latest``), or that the run starts again; or, when torchrun
restarts the run (restarts left, and the command resumes), that it does, and from what.
Said by a source's failure (`ending.source_failed`), a schedule's (`schedule_end`),
and a rank whose peer is gone (`rank_failure.peer_failure`).
"""

from __future__ import annotations

from pathlib import Path

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.common.setting import setting
from melissa_trainer.core.view import TrainerView
from melissa_trainer.stream.launch_restarts import restarts

__all__ = ["SAVES", "failure_words", "restart_words"]


def failure_words(trainer: TrainerView, written: Path | None, why: str, resume_note: str) -> str:
    """What a resume after a source's failure does, for the failure's ERROR line: the
    checkpoint `written` at the failure (`save_at_failure`), or why none was (`why`) and
    the latest one to resume from, or that the run starts again; then `resume_note` (the
    source's words: what a resume keeps), unless nothing was trained.

    Under torchrun with restarts left (`launch_restarts.restarts`) and a command that
    resumes (``resume_from_checkpoint`` set: what the stop record's ``restarts_left``
    needs too), torchrun restarts the run at once: the words say so first (K of N
    left), and what the restart resumes from (`restart_words`), then what a person does
    if the restarts fail too. Otherwise (not torchrun, no restart left, a command that
    does not resume) they say what a person does once the cause is fixed."""
    resume = setting("resume_from_checkpoint", "latest")
    note = f"; {resume_note}" if resume_note else ""
    latest = ckpt.latest_checkpoint(trainer.checkpoint_root)
    restart = restart_words(trainer, written or latest)
    if restart:
        # (no person needs to act now: torchrun restarts it; `why` says what it loses)
        lost = f" (no checkpoint at this stop: {why}; {SAVES})" if written is None and why else ""
        if written is None and trainer.state.global_step == 0:
            lost, note = "", ""
        fixed = f"if the restarts fail too, once the cause is fixed, resume with {resume}"
        return f"{restart}{lost}; {fixed}{note}"
    if written is not None:
        how = f"checkpoint {written} holds this step: once the cause is fixed, "
        how += f"resume with {resume}"
    elif latest is not None:
        how = (
            f"no checkpoint at this stop ({why}): once the cause is fixed, resume from "
            f"{latest} with {resume}; {SAVES}"
        )
    elif trainer.state.global_step == 0:
        how, note = "no checkpoint was written: once the cause is fixed, run it again", ""
    else:
        how = f"no checkpoint was written ({why}): once the cause is fixed, run it again; {SAVES}"
    return how + note


def restart_words(trainer: TrainerView, newest: Path | None) -> str:
    """That torchrun restarts this run and what the restart resumes from, or "" when no
    restart follows that resumes: not under torchrun, no restart left, or a command
    that does not resume (``resume_from_checkpoint`` None: the restart's set-up would
    not resume, and the stop record promises no restart either). `newest`: the newest
    checkpoint, which ``'latest'`` resumes from (None: none yet, the run starts again)."""
    known = restarts()
    if known is None or known[0] == 0:
        return ""  # (the trainer's args are not read: a stand-in trainer may lack them)
    resume = trainer.args.resume_from_checkpoint
    if resume is None:
        return ""
    left, most = known
    said = f"torchrun restarts it ({left} of {most} restarts left): "
    if resume != "latest":
        return said + f"it resumes from {resume}, as its command says"
    if newest is None:
        return said + "it starts again from step 0 (no checkpoint was written yet)"
    return said + f"it resumes from checkpoint {newest}"


#: what sets how much training a failure that cannot be checkpointed loses
SAVES = "save_steps or save_seconds set how often a checkpoint is written"
