"""The heat_guess example's words for its output folder: the ``--output_dir`` the user
typed, never the trainer's folder inside it (``OUTPUT_DIR/run``, which the library's own
lines name: a folder the user never typed), as its rerun refusal says it
(`cli.rerun_words`): a resume from "latest" that finds no checkpoint (`resume_or_afresh`:
the trainer's own WARNING, said in those words) and the refusal of a folder another run
holds (`in_user_words`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from melissa_trainer.checkpoint import paths
from melissa_trainer.checkpoint.paths import NO_LATEST
from melissa_trainer.checkpoint.replaced import to_restore
from melissa_trainer.common.checkpoint_names import latest_checkpoint

__all__ = ["afresh_words", "in_user_words", "resume_or_afresh", "resumes_a_checkpoint"]

E = TypeVar("E", bound=BaseException)


def afresh_words(output_dir: str, root: str) -> str:
    """What a run with ``--resume_from_checkpoint latest`` says where `output_dir` holds
    no checkpoint (none in `root`, the trainer's): it starts afresh."""
    return (
        f"--resume_from_checkpoint latest: --output_dir {output_dir} holds no checkpoint "
        f"(none in {root}), starting afresh"
    )


class _AfreshInUserWords(logging.Filter):
    """The trainer's WARNING that "latest" finds no checkpoint (`NO_LATEST`, naming its
    own folder) said instead as `afresh_words` (the folder the user typed), for each
    checkpoints' folder noted (`resume_or_afresh`)."""

    def __init__(self) -> None:
        super().__init__()
        self.folders: dict[Path, str] = {}  # checkpoints' folder -> the user's output_dir

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != NO_LATEST or len(record.args or ()) != 1:
            return True
        assert isinstance(record.args, tuple)
        output_dir = self.folders.get(Path(str(record.args[0])).resolve())
        if output_dir is not None:
            record.msg, record.args = afresh_words(output_dir, str(record.args[0])), ()
        return True


_IN_USER_WORDS = _AfreshInUserWords()


@contextmanager
def resume_or_afresh(resume: str | None, output_dir: str, run_dir: Path) -> Iterator[str | None]:
    """`resume` (``--resume_from_checkpoint``) as the trainer in `run_dir` is to get it,
    for the run inside this ``with``: as given. "latest" where no checkpoint is there
    yet stays "latest": the trainer starts afresh, and a torchrun restart
    (``--max_restarts``), which runs this same command, resumes what the failed attempt
    saved, so the trainer's stop record must promise it (a None here made it promise
    none). The trainer's WARNING that it starts afresh names its own folder: said
    instead as `afresh_words`, naming `output_dir` (the trainer says it on its main rank
    alone), by a logging filter installed for the run alone: removed, with its folder,
    when the ``with`` ends, however it ends, so that a second run in this process (a
    test's, a notebook's) finds none left of the first (nor another run's WARNING
    rewritten in this example's words)."""
    if resume != "latest":
        yield resume
        return
    checkpoints, folder = logging.getLogger(paths.__name__), (run_dir / "checkpoints").resolve()
    _IN_USER_WORDS.folders[folder] = output_dir
    if _IN_USER_WORDS not in checkpoints.filters:
        checkpoints.addFilter(_IN_USER_WORDS)
    try:
        yield resume
    finally:
        _IN_USER_WORDS.folders.pop(folder, None)
        if not _IN_USER_WORDS.folders:  # (the last run that needed it is over)
            checkpoints.removeFilter(_IN_USER_WORDS)


def resumes_a_checkpoint(resume: str | None, run_dir: Path) -> bool:
    """Whether the trainer in `run_dir`, given `resume` (`resume_or_afresh`'s), will
    resume a checkpoint: a path, or "latest" where a checkpoint is there (or one whose
    replacement a crash interrupted: `to_restore`, the trainer puts it back). "latest"
    with none starts afresh, so the records an earlier run left (one killed before its
    first checkpoint, a torchrun attempt that failed before it) are no simulation of
    this run: the example removes them as for a fresh run. Look while the trainer holds
    the folder (no other run writes a checkpoint there meanwhile)."""
    if resume is None:
        return False
    root = run_dir / "checkpoints"
    return resume != "latest" or latest_checkpoint(root) is not None or bool(to_restore(root))


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
