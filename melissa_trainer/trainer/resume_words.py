"""What an ERROR line of a failure says a resume does: the checkpoint written at the
failure, or why none was and the latest one to resume from (with
``--resume_from_checkpoint latest``), or that the run starts again. Said by a source's
failure (`ending.source_failed`), a schedule's (`schedule_end`), and a rank whose peer
is gone (`rank_failure.peer_failure`).
"""

from __future__ import annotations

from pathlib import Path

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.common.setting import setting
from melissa_trainer.core.view import TrainerView

__all__ = ["SAVES", "failure_words"]


def failure_words(trainer: TrainerView, written: Path | None, why: str, resume_note: str) -> str:
    """What a resume after a source's failure does, for the failure's ERROR line: the
    checkpoint `written` at the failure (`save_at_failure`), or why none was (`why`) and
    the latest one to resume from, or that the run starts again; then `resume_note` (the
    source's words: what a resume keeps), unless nothing was trained."""
    resume = setting("resume_from_checkpoint", "latest")
    note = f"; {resume_note}" if resume_note else ""
    latest = ckpt.latest_checkpoint(trainer.checkpoint_root)
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


#: what sets how much training a failure that cannot be checkpointed loses
SAVES = "save_steps or save_seconds set how often a checkpoint is written"
