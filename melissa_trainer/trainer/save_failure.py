"""A save that failed: what every rank does once the ranks agreed that it failed, and
what is said.

During training, ``on_save_error="stop"`` raises `CheckpointSaveError` on every rank,
``"continue"`` logs the error and training goes on (the next save tries again).

A save at the end (`at_end`: the end's action point, where ``save_at_end`` saves; a
preemption's save; the save at a source's failure) has no training left to go on
with: a failed one is said as the end's (`final_words`: training has ended, the
newest checkpoint on disk and the steps after it that are not, which exist in this
process alone, and the fix), and at the end of a run that was not preempted
`FinalCheckpointSaveError` is raised on every rank whatever `on_save_error`: a run
whose final state was not written never ends with exit status 0 (user trial 33: a full
disk at the end, "Training goes on without this checkpoint", exit 0). A preemption's
failed save under ``"continue"`` is logged so, and the `Preempted` that follows (exit
status 128 + the signal's number) names the step a resume starts from.

Every rank calls `save_failed` with the same errors (gathered by `rank_reports.agree`):
every rank raises, or none does; no rank waits in a collective another skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import (
    CheckpointSaveError,
    FinalCheckpointSaveError,
    save_advice,
)
from melissa_trainer.common.setting import setting
from melissa_trainer.trainer.rank_reports import from_main

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["EndKind", "at_end", "final_words", "save_failed"]

logger = logging.getLogger(__name__)

#: which end a save is: the run's end ("end"), a preemption's ("preemption"), a
#: source's failure ("failure")
EndKind = Literal["end", "preemption", "failure"]

#: per trainer (by id: only while `at_end` runs, which removes it): the end whose saves
#: run now; absent: a save during training
_AT_END: dict[int, EndKind] = {}

_ENDED = {
    "end": "Training has ended",
    "preemption": "Training stopped for the preemption",
    "failure": "Training stopped at the source's failure",
}


@contextmanager
def at_end(trainer: Any, kind: EndKind) -> Iterator[None]:
    """The saves of `trainer` within are its end's, of `kind` (`save_failed` says a
    failed one so). Every rank enters it at the same step (the end is agreed)."""
    key, before = id(trainer), _AT_END.get(id(trainer))
    _AT_END[key] = kind
    try:
        yield
    finally:
        if before is None:
            _AT_END.pop(key, None)
        else:
            _AT_END[key] = before


def save_failed(
    trainer: OnlineTrainer,
    staging: Path,
    final: Path,
    previous: Path | None,
    failed: tuple[list[str], set[str]],
    failure: BaseException | None,
) -> None:
    """Every rank, after a failed save (`failed`: every rank's errors, and the kinds of
    fix they call for, `save_failure_kind`; `previous`: the newest checkpoint on disk
    before it): the main rank removes the staging directory, and says whether it did
    (one broadcast); then, during training, raise `CheckpointSaveError`
    (``on_save_error="stop"``) or log and go on. At the end (`at_end`):
    `FinalCheckpointSaveError`, with `final_words`, whatever `on_save_error`, but for a
    preemption's save under ``"continue"``, logged (its `Preempted` follows). The
    advice depends on the errors (`save_advice`: room for a full disk, a writable
    directory for a read-only one, else the error's own words)."""
    errors, kinds = failed
    fate = ""  # (no staging directory made: nothing to remove, nothing said)
    if trainer.is_main_process and staging.exists():
        fate = (
            "The partial checkpoint was removed; "
            if ckpt.remove_staging(staging)
            else f"The partial checkpoint {staging} could not be removed (it is never "
            "resumed from); "
        )
    fate = from_main(trainer, fate, f"{final.name}'s failed save, its removal")
    intact = f"{previous} is intact" if previous is not None else "there is no earlier checkpoint"
    said = f"could not save checkpoint {final}: {'; '.join(errors)}. {fate}{intact}. "
    stop = trainer.args.on_save_error == "stop"
    end = _AT_END.get(id(trainer))
    if end is not None:
        message = said + final_words(trainer, previous, kinds, end)
        if end != "preemption" or stop:
            saved = _step_of(previous)
            raise FinalCheckpointSaveError(message, trainer.state.global_step, saved) from failure
    elif stop:
        message = (
            f"{said}Training stops (on_save_error='stop'): "
            f"{save_advice(kinds, final.parent, previous)}; or set "
            f"{setting('on_save_error', 'continue')} to train on without the checkpoints "
            "that fail"
        )
        raise CheckpointSaveError(message) from failure
    else:
        message = f"{said}Training goes on without this checkpoint (on_save_error='continue')"
    if trainer.is_main_process:
        logger.error("%s", message)
    if failure is not None:  # this rank's own error, with its traceback
        logger.error("rank %d's save error", trainer.process_index, exc_info=failure)


def final_words(
    trainer: OnlineTrainer, previous: Path | None, kinds: set[str], end: EndKind
) -> str:
    """What a failed save at the `end` means (`previous`: the newest checkpoint on
    disk; `kinds`: the errors', `save_failure_kind`): training has ended, this final
    checkpoint is not on disk, which steps are not saved (their model and the study's
    progress, lost when the process exits), and how to get them back."""
    step, saved = trainer.state.global_step, _step_of(previous)
    if previous is None or saved is None:
        lost = f"no checkpoint is on disk: steps 1..{step} are not saved"
        fix = "once the cause is fixed (make room, or another output_dir), run it again"
    else:
        if saved == step:
            lost = (
                f"the newest checkpoint on disk, {previous}, is of step {step} but lacks "
                "what came since it was written (samples received, simulations ended)"
            )
        else:
            lost = (
                f"the newest checkpoint on disk is {previous} (step {saved}): steps "
                f"{saved + 1}..{step} are not saved"
            )
        fix = f"{save_advice(kinds, previous.parent, previous)} (it trains them again)"
        if "access" not in kinds:  # (its advice names another output_dir already)
            fix += (
                f"; or train in another {setting('output_dir', 'DIR', placeholder=True)}, "
                f"resuming from {previous} by its path, "
                f"{setting('resume_from_checkpoint', 'PATH', placeholder=True)}"
            )
    continued = (
        " (on_save_error='continue' trains on past a failed save; at the end nothing is "
        "left to train on)"
        if trainer.args.on_save_error == "continue" and end != "preemption"
        else ""
    )
    return (
        f"{_ENDED[end]} at step {step} and its final checkpoint could not be written"
        f"{continued}: {lost}; the model and the study's progress since then exist in "
        f"this process alone and are lost when it exits. To get them back: {fix}"
    )


def _step_of(checkpoint: Path | None) -> int | None:
    """The step of `checkpoint` (``checkpoint-N``), None for None."""
    return None if checkpoint is None else int(checkpoint.name.removeprefix(ckpt.PREFIX))
