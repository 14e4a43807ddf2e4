"""The checkpoint a trainer's start resumes from, or its start afresh: `resolve_resume`.

`OnlineTrainer.train()`'s start (`starting`) asks it which checkpoint to load
(``resume_from_checkpoint``: "latest" or a path, verified the same on every rank) and,
without one, whether this run may start afresh in its output_dir (`_start_afresh`: not
over an earlier run's checkpoints, unless `overwrite_output_dir` moves them aside).
Collective: every rank calls it, and all go on, or all raise, together.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from melissa_trainer.checkpoint import manifest
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import (
    CheckpointError,
    describe_verification,
    none_verifies,
    others,
)
from melissa_trainer.checkpoint.later_runs import set_aside_later, set_aside_others
from melissa_trainer.checkpoint.replaced import restore_replaced, to_restore
from melissa_trainer.common.refusal import elsewhere, said_once
from melissa_trainer.common.setting import setting
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.trainer.checkpointing import verify
from melissa_trainer.trainer.history_check import refuse_foreign_latest
from melissa_trainer.trainer.rank_reports import from_main

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

# (the name it had before the move out of `checkpointing`: a filter on it, a test's, holds)
logger = logging.getLogger("melissa_trainer.trainer.checkpointing")


def resolve_resume(trainer: OnlineTrainer) -> Path | None:
    """The checkpoint `args.resume_from_checkpoint` names, verified; the same on every
    rank (the main rank lists the checkpoints; every rank verifies its share; the
    problems are gathered). Collective.

    "latest": the newest checkpoint that verifies; each one that does not is skipped
    with one warning naming its files and what is wrong with them, then moved aside with
    any other newer one (`set_aside_later`: its fault may pass, a rotation of this run's
    saves would delete it, a later "latest" take it over this run's) (files not in its
    manifest that are not the trainer's, a hook's artefacts, do not count: the one
    taken is warned about once, `verify`); a checkpoint without a manifest (an earlier
    version's) is taken with a warning that it is unverified; one of another training
    than the folder's is refused (`history_check`); None (start afresh, with a warning)
    when there is no checkpoint; `CheckpointError` when there are some but none verifies
    (starting afresh would silently discard them). A path: `CheckpointError` naming the
    files when it does not verify. (Both: said once.) Either way the folder's checkpoints
    of other trainings are moved aside (`set_aside_others`).
    """
    arg, root = trainer.args.resume_from_checkpoint, trainer.checkpoint_root
    if arg is None:
        _start_afresh(trainer)
        return None
    if arg != "latest":
        path = ckpt.resolve_resume(arg, root)
        assert path is not None
        problems = verify(trainer, path)
        if problems:
            text = f"{describe_verification(path, problems)}; {others(path)}"
            raise said_once(CheckpointError(text, path, problems[0].file), trainer.process_index)
        if trainer.is_main_process:  # (the run not continued: out of this one's way)
            set_aside_others(path, Path(root))
            set_aside_later(path, Path(root))
        return path
    if trainer.is_main_process:  # (a replacement a crash interrupted: its old one back)
        restore_replaced(root)
    listed = [str(p) for p in ckpt.list_checkpoints(root)]
    found = from_main(trainer, listed, "the choice of the checkpoint to resume from")
    if not found:  # (None: starting afresh, said by the main rank only, as every rank
        # holds the same list: htrial3 read it twice under 2 ranks)
        if trainer.is_main_process:
            ckpt.resolve_resume(arg, root)  # (its warning)
        return None
    seen: list[manifest.Problem] = []
    skipped: list[str] = []  # (rank 0's words for each, said once the choice is made)
    for candidate in reversed(found):
        path = Path(candidate)
        problems = verify(trainer, path)
        if not problems:
            refuse_foreign_latest(trainer, path)  # (another training's: copied in)
            if skipped:  # (rank 0) out of this run's way: another history's, maybe intact
                aside = set_aside_later(path, Path(root), said=False)
                moved = (
                    "" if aside is None else f", moved to {aside} (this run continues {path.name})"
                )
                for words in skipped:
                    logger.warning("%s: skipped%s", words, moved)
            return path
        seen += problems
        if trainer.is_main_process:
            skipped.append(describe_verification(path, problems))
    for words in skipped:
        logger.warning("%s: skipped", words)
    refused = CheckpointError(none_verifies(Path(root), seen), Path(root))
    raise said_once(refused, trainer.process_index)


def start_refusal(trainer: OnlineTrainer) -> list[str]:
    """The earlier run's checkpoints for which this trainer's `train()` will refuse to
    start (`_start_afresh`: no `resume_from_checkpoint`, no `overwrite_output_dir`, step
    0), by name, oldest first; empty: it will not refuse for them. A checkpoint that
    `train()` puts back first (`restore_replaced`: its replacement interrupted) counts.
    Looks only: any rank, before `train()` or in it (an example asks before it clears
    what an earlier run left, `examples/study_common.py`)."""
    args, root = trainer.args, trainer.checkpoint_root
    if trainer.state.global_step > 0 or args.resume_from_checkpoint is not None:
        return []
    if args.overwrite_output_dir:
        return []
    names = {p.name for p in ckpt.list_checkpoints(root)}
    names.update(final.name for _, final in to_restore(root))
    return sorted(names, key=lambda name: int(name.removeprefix(ckpt.PREFIX)))


def _start_afresh(trainer: OnlineTrainer) -> None:
    """Start afresh (`resume_from_checkpoint` None) only where no earlier run's
    checkpoints would be mixed with this run's. Collective: the main rank looks and acts,
    every rank gets its verdict (one broadcast) and all go on, or all raise, together.

    A trainer past step 0 (it called `load_checkpoint` by hand) continues that run:
    nothing to check. Otherwise complete checkpoints under `checkpoint_root` are refused
    (`ConfigError` naming the three ways on), or, with `overwrite_output_dir`, their
    folder is moved aside (`checkpoint.move_aside`) before anything starts: a later
    ``"latest"`` would otherwise take the newest step of either run, and a save of a
    step both wrote would replace the earlier run's. With `overwrite_output_dir` the
    default TensorBoard folder (``{output_dir}/runs``, no `logging_dir` given) is moved
    aside too, when not empty: TensorBoard would draw both runs as one series, the new
    run's steps after the old one's end. A `logging_dir` of the user's is left alone.
    """
    if trainer.state.global_step > 0:
        return
    args, root = trainer.args, trainer.checkpoint_root
    verdict: tuple[str, str] = ("fresh", "")
    if trainer.is_main_process:
        restore_replaced(root)  # (seen, refused or moved aside with the others)
        found = [p.name for p in ckpt.list_checkpoints(root)]
        if refused := start_refusal(trainer):
            verdict = ("refused", ", ".join(refused))
        elif args.overwrite_output_dir:
            runs = Path(args.resolved_logging_dir) if args.logging_dir is None else None
            now = time.time()  # one stamp for both folders
            try:
                moved = [str(ckpt.move_aside(root, now))] if found else []
                if runs is not None and runs.is_dir() and any(runs.iterdir()):
                    moved.append(str(ckpt.move_aside(runs, now)))
                verdict = ("moved", " and ".join(moved)) if moved else verdict
            except OSError as exc:
                verdict = ("failed", f"{type(exc).__name__}: {exc}")
    kind, detail = from_main(trainer, verdict, "the start, its look for earlier checkpoints")
    if kind == "refused":  # (said by rank 0 only, its message alone: `refusal`)
        out = args.output_dir
        raise said_once(
            ConfigError(
                f"output_dir={out!r} holds checkpoints of an earlier run ({detail}) and "
                "resume_from_checkpoint is unset or false (a run starts afresh only in an "
                "output_dir without checkpoints): continue that run with "
                f"{setting('resume_from_checkpoint', 'latest')}, start afresh in another "
                "output_dir (--output_dir on the command line), or pass "
                f"{setting('overwrite_output_dir', True)} to move them to "
                f"{root.name}-previous-TIME beside them (nothing is deleted)",
                context="start",
            ),
            trainer.process_index,
        )
    if kind == "failed":
        failed = RuntimeError(
            f"overwrite_output_dir: could not move the earlier run aside ({detail})"
        )
        raise elsewhere(failed, trainer.process_index)
    if kind == "moved" and trainer.is_main_process:
        logger.warning(
            "overwrite_output_dir: the earlier run's files are now in %s; this run starts afresh",
            detail,
        )
