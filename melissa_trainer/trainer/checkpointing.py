"""An `OnlineTrainer` checkpoint written, verified and read on every rank.

The part of `OnlineTrainer` that `save_checkpoint`, `load_checkpoint` and the choice of
the checkpoint to resume from delegate to (through `actions`). What a checkpoint holds
is `checkpoint.registry`'s (its named parts, each written and read by its owner, the
format version, the migrations in `common.migrations`); the directory mechanics
(staging, fsync, atomic rename, rotation) are `melissa_trainer.checkpoint.paths`'s, the
manifest `checkpoint.manifest`'s, the errors `checkpoint.errors`'; the layout is in
`checkpoint`'s module docstring.

No rank ever waits in a collective that another rank skipped: where a step may fail on
one rank (a write, a load), every rank reports its outcome in one all-gather (`agree`,
`rank_reports`') instead of a barrier, and all go on, or all raise, together.
"""

from __future__ import annotations

import logging
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from melissa_trainer.checkpoint import after_save, history, manifest, registry, resumed_args
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import (
    CheckpointError,
    describe_foreign,
    describe_save_failure,
    describe_verification,
    none_verifies,
    others,
    save_failure_kind,
)
from melissa_trainer.checkpoint.later_runs import set_aside_later, set_aside_others
from melissa_trainer.checkpoint.model_dtypes import warn_changed as warn_changed_dtypes
from melissa_trainer.checkpoint.replaced import begin_save, restore_replaced
from melissa_trainer.common.refusal import elsewhere, said_once
from melissa_trainer.common.setting import setting
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.hooks import Event, Hook
from melissa_trainer.trainer import end_save
from melissa_trainer.trainer.history_check import refuse_foreign_latest
from melissa_trainer.trainer.rank_reports import agree, attempt, from_main, watched
from melissa_trainer.trainer.refusals import in_training
from melissa_trainer.trainer.save_failure import save_failed

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

logger = logging.getLogger(__name__)


def save_checkpoint(trainer: OnlineTrainer) -> Path | None:
    """See `OnlineTrainer.save_checkpoint`. Collective.

    Steps, each ended by every rank reporting its outcome (`agree`): the main rank
    creates the staging directory; every rank writes its files; every rank hashes and
    fsyncs what it wrote (the entries gathered on every rank); the main rank writes the
    manifest, renames the directory and rotates. A failure at any step on any rank
    (a full disk: `describe_save_failure`) stops every rank there: the main rank
    removes the staging directory (no rank writes into it any more), `last_save_step`
    is restored, and `CheckpointSaveError` is raised on every rank, or, with
    ``on_save_error="continue"``, logged by the main rank and None returned; a save at
    the end raises `FinalCheckpointSaveError` either way (`save_failure`). After the
    hooks' on_save: `CheckpointError` on every rank if they changed the trainer's files
    in the checkpoint (whatever `on_save_error`: a hook's bug, not a full disk), a
    warning once if they added their own (`_after_hooks`).
    """
    acc, state = trainer.accelerator, trainer.state
    # every sample trained on up to this step, counted over ranks (otherwise at the next log)
    counts = torch.tensor(
        [trainer.log_figures.take_untotaled()], dtype=torch.float64, device=acc.device
    )
    name = ckpt.checkpoint_path(trainer.checkpoint_root, state.global_step).name
    if trainer.stop_sync.distributed:
        with watched(trainer, "all-reduce", f"{name}'s save, before it (the samples seen)"):
            torch.distributed.all_reduce(counts)
    state.total_samples_seen += int(counts.item())
    last_save = state.last_save_step
    state.last_save_step = state.global_step  # the checkpoint records its own step
    root, step, rank = trainer.checkpoint_root, state.global_step, acc.process_index
    staging, final = ckpt.staging_path(root, step), ckpt.checkpoint_path(root, step)
    previous = ckpt.latest_checkpoint(root)  # the estimate of a full disk's bytes needed
    hasher, before = manifest.Hasher(staging, rank), end_save.before_save(trainer)

    def fail(exc: BaseException) -> tuple[str, str]:  # (what, the kind of fix: errors')
        said = describe_save_failure(exc, staging, final, previous, rank)
        return said, save_failure_kind(exc, said)

    failure: BaseException | None = None
    errors: list[str] = []
    kinds: set[str] = set()
    steps = (
        (lambda: begin_save(root, step)) if acc.is_main_process else None,
        lambda: registry.write(trainer, staging),
        lambda: _sync_and_hash(staging, rank, acc.num_processes, hasher),
        (lambda: _commit(trainer, staging, final, hasher.entries)) if acc.is_main_process else None,
    )
    for index, action in enumerate(steps):
        failure = attempt(action)
        hashed = hasher.entries if index == 2 else {}  # this rank's files, once
        at = f"{name}'s save, step {index + 1} of 4 ({_SAVE_STEPS[index]})"
        reports = agree(trainer, (fail(failure) if failure else None, hashed), at)
        errors = [error[0] for error, _ in reports if error]
        kinds = {error[1] for error, _ in reports if error}
        if errors:
            break
        for _, entries in reports:  # every rank's files, for the manifest
            hasher.entries.update(entries)
    if errors:
        state.last_save_step = last_save
        save_failed(trainer, staging, final, previous, (errors, kinds), failure)
        return None
    end_save.record(trainer, step, end_save.saved(before, hasher.entries, rank))
    saving = [h for h in trainer.hooks.hooks if type(h).on_save is not Hook.on_save]
    watch = after_save.Watch(final, hasher.entries, rank, acc.is_main_process) if saving else None
    # the suspects a message names: the user's hooks (ours write nothing there), else all
    hooks = [h.name for h in saving if not type(h).__module__.startswith("melissa_trainer.")]
    hooks = hooks or [h.name for h in saving]
    if acc.is_main_process:
        try:
            removed = ckpt.rotate(root, trainer.args.max_to_keep, keep=final)
        except OSError as exc:  # the new checkpoint is in place: the save succeeded
            logger.warning("saved %s, but could not remove old checkpoints: %s", final, exc)
        else:
            logger.info("saved %s (removed %s)", final, [p.name for p in removed])
    trainer.hooks.fire(Event.SAVE, trainer, state, trainer.control, str(final))
    if watch is not None:
        _after_hooks(trainer, watch, hooks)
    return final


#: what each step of a save does (`save_checkpoint`), for the wait watch's warnings
_SAVE_STEPS = (
    "rank 0 makes the staging directory",
    "every rank writes its files",
    "every rank fsyncs and hashes its files",
    "rank 0 writes the manifest and renames the directory",
)

#: the trainers whose main rank has warned of files the hooks' on_save added
_SAID_HOOK_FILES: weakref.WeakSet[Any] = weakref.WeakSet()


def _after_hooks(trainer: OnlineTrainer, watch: after_save.Watch, hooks: list[str]) -> None:
    """After the `hooks`' on_save: `CheckpointError` on every rank when they changed the
    checkpoint so that it no longer verifies; else the main rank warns, once per run,
    of the files they added to it (`checkpoint.after_save`). Collective."""
    at = f"{watch.checkpoint.name}'s save, after the hooks' on_save"
    spoiled = [found for rank in agree(trainer, watch.spoiled(), at) for found in rank]
    if spoiled:
        message = after_save.describe_spoiled(watch.checkpoint, spoiled, hooks)
        raise in_training(CheckpointError(message, watch.checkpoint, spoiled[0].split(": ")[0]))
    added = watch.foreign()
    if added and trainer not in _SAID_HOOK_FILES:
        _SAID_HOOK_FILES.add(trainer)
        logger.warning("%s", after_save.describe_hook_files(watch.checkpoint, added, hooks))


def _sync_and_hash(staging: Path, rank: int, world_size: int, hasher: manifest.Hasher) -> None:
    """fsync this rank's files of `staging`, hashing each (in threads) as it goes."""
    try:
        ckpt.fsync_rank_files(staging, rank, world_size, visit=hasher)
    finally:
        hasher.finish()  # also after a failed fsync: no hashing thread outlives the save


def _commit(
    trainer: OnlineTrainer, staging: Path, final: Path, entries: dict[str, manifest.Entry]
) -> None:
    """Main rank: the manifest of every rank's files, last, then the atomic rename;
    before it, the folder's record of the training (`history`: a crash in between
    leaves no checkpoint of another history than the record's)."""
    manifest.write(staging, entries, trainer.state.global_step)
    if trainer.state.history is not None:
        history.write_record(trainer.checkpoint_root, trainer.state.history)
    ckpt.commit(staging, final)


# -- choosing the checkpoint to resume from ----------------------------------------------


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
        if found and not args.overwrite_output_dir:
            verdict = ("refused", ", ".join(found))
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


def verify(trainer: OnlineTrainer, path: Path) -> list[manifest.Problem]:
    """The problems of checkpoint `path` against its manifest, the same on every rank:
    sizes first (cheap), then hashes (each rank its own files). [] when it verifies,
    or has no manifest (an earlier version's: the main rank warns that it is
    unverified). A ``checkpoint-N`` that holds another step than N (`manifest.misnamed`)
    does not verify. Files the manifest lacks where the loading never looks (`manifest.
    unexpected`'s foreign ones: a hook's artefacts) are no problem: when the checkpoint
    verifies, the main rank warns once, naming them. Collective."""
    read: tuple[dict[str, manifest.Entry] | None, str | None, manifest.Problem | None]
    read = (None, None, None)
    if trainer.is_main_process:  # the main rank's reading decides, for every rank
        try:
            read = (manifest.read(path), None, manifest.misnamed(path))
        except ValueError as exc:
            read = (None, str(exc), None)
    entries, unreadable, misnamed = from_main(trainer, read, f"{path.name}'s check, its manifest")
    if unreadable is not None:  # (its message names the file: the Problem does)
        what = unreadable.removeprefix(f"{path / manifest.MANIFEST}: ")
        return [manifest.Problem(manifest.MANIFEST, what)]
    if misnamed is not None:  # (another step's state under this step's name)
        return [misnamed]
    if entries is None:
        if trainer.is_main_process:
            logger.warning(
                "%s has no %s (written by a version before checkpoint manifests): "
                "resuming from it unverified",
                path,
                manifest.MANIFEST,
            )
        return []
    mine = manifest.owned_by(entries, trainer.process_index, trainer.num_processes)
    local = manifest.check_sizes(path, mine)
    foreign: list[str] = []
    if trainer.is_main_process:
        for problem in manifest.unexpected(path, entries):
            if problem.foreign:  # not the trainer's state: said once, if it is taken
                foreign.append(problem.file)
            else:
                local.append(problem)
    problems = [p for found in agree(trainer, local, f"{path.name}'s check, sizes") for p in found]
    if not problems:  # the sizes are right: read every file
        hashes = manifest.check_hashes(path, mine)
        at = f"{path.name}'s check, every rank hashing its files"
        problems = [p for found in agree(trainer, hashes, at) for p in found]
    if not problems and foreign:
        logger.warning("%s", describe_foreign(path, foreign))
    return sorted(problems, key=lambda p: p.file)


# -- loading ---------------------------------------------------------------------------------


def load_checkpoint(trainer: OnlineTrainer, path: Path) -> None:
    """See `OnlineTrainer.load_checkpoint`. Collective: a load error on any rank is
    raised on every rank, never a hang, said once: rank 0 raises its own (`StudyChanged`,
    a `CheckpointError` naming the file...) or one with the first failed rank's text,
    the others quiet copies (`elsewhere`; a rank's own error of another text as it is). A
    checkpoint of another number of ranks is resharded (`checkpoint.registry.load`).
    The optimizer's hyperparameters and the scheduler's settings that the load changed
    from those the script built are named in a warning (`resumed_args.changes`)."""
    failure: Exception | None = None
    scheduler = trainer.lr_scheduler
    built = resumed_args.built(trainer.optimizer.param_groups, scheduler)  # (before: loaded)
    try:
        registry.load(trainer, path)
        resumed_args.check_same_optimizer(trainer.optimizer, path, built[0])
    except Exception as exc:  # (also a study's refusal: every rank must hear of it)
        failure = exc
    said = agree(trainer, str(failure) if failure else None, f"{path.name}'s load")
    failed = [(r, e) for r, e in enumerate(said) if e]
    if failed:
        first, text = failed[0]
        error = failure or CheckpointError(f"rank {first} could not load {path}: {text}", path)
        if trainer.process_index == 0 or (failure is not None and str(error) != text):
            raise error  # (rank 0 says it; another rank's error of another text, as it is)
        raise elsewhere(error, trainer.process_index)
    end_save.record(trainer, trainer.state.global_step)  # (what the checkpoint holds)
    if trainer.is_main_process:
        changes = resumed_args.changes(built, trainer.optimizer.param_groups, scheduler)
        resumed_args.warn_changed_hyperparameters(path, changes)
        warn_changed_dtypes(path, trainer.accelerator.unwrap_model(trainer.model))
    logger.info("resumed from %s at step %d", path, trainer.state.global_step)
