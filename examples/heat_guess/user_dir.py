"""The heat_guess example's words for its output folder: the ``--output_dir`` the user
typed, never the trainer's folder inside it (``OUTPUT_DIR/run``, which the library's own
lines name: a folder the user never typed), as its rerun refusal says it
(`cli.rerun_words`): a resume from "latest" that finds no checkpoint (`resume_or_afresh`)
and the refusal of a folder another run holds (`in_user_words`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TypeVar

from melissa_trainer.checkpoint.replaced import to_restore
from melissa_trainer.common.checkpoint_names import latest_checkpoint

__all__ = ["afresh_words", "in_user_words", "resume_or_afresh"]

logger = logging.getLogger("heat_guess")

E = TypeVar("E", bound=BaseException)


def afresh_words(output_dir: str, root: str) -> str:
    """What a run with ``--resume_from_checkpoint latest`` says where `output_dir` holds
    no checkpoint (none in `root`, the trainer's): it starts afresh."""
    return (
        f"--resume_from_checkpoint latest: --output_dir {output_dir} holds no checkpoint "
        f"(none in {root}), starting afresh"
    )


def resume_or_afresh(resume: str | None, output_dir: str, run_dir: Path, main: bool) -> str | None:
    """`resume` (``--resume_from_checkpoint``) as the trainer in `run_dir` is to get it:
    None, said (`afresh_words`, by the `main` rank), for "latest" where no checkpoint is
    there, nor one whose replacement a crash interrupted (`to_restore`: the trainer puts
    it back and resumes it); else as given. The trainer said it naming its own folder."""
    root = run_dir / "checkpoints"
    if resume != "latest" or latest_checkpoint(root) is not None or to_restore(root):
        return resume
    if main:
        logger.warning("%s", afresh_words(output_dir, str(root)))
    return None


def in_user_words(error: E, trainer_dir: str, output_dir: str) -> E:
    """`error`, a refusal naming the trainer's folder `trainer_dir` as
    ``output_dir '.../run'`` (`OutputDirLocked`: another run holds it), naming instead
    the folder the user gave, ``--output_dir OUTPUT_DIR``: a copy of the same class (the
    quiet copy of a rank other than 0 too: `common.refusal.elsewhere`), its attributes
    kept; `error` itself when it does not name that folder so."""
    named, ours = f"output_dir {trainer_dir!r}", f"--output_dir {output_dir}"
    if named not in str(error):
        return error
    cls = type(error)
    said = cls.__new__(cls)
    said.__dict__.update(error.__dict__)
    said.args = (str(error).replace(named, ours),)
    code = getattr(error, "code", None)  # (a copy said once: its text is its exit code)
    if isinstance(code, str):
        said.code = code.replace(named, ours)  # type: ignore[attr-defined]
    return said
