"""An `OnlineTrainer` checkpoint written, verified and read on every rank.

The part of `OnlineTrainer` that `save_checkpoint` and `load_checkpoint` delegate to
(through `actions`); the choice of the checkpoint to resume from is `resume_choice`'s.
What a checkpoint holds is `checkpoint.registry`'s (its named parts, each written and
read by its owner, the format version, the migrations in `common.migrations`); the
directory mechanics (staging, fsync, atomic rename, rotation) are
`melissa_trainer.checkpoint.paths`'s, the manifest `checkpoint.manifest`'s, the errors
`checkpoint.errors`'; the layout is in `checkpoint`'s module docstring.

No rank ever waits in a collective that another rank skipped: where a step may fail on
one rank (a write, a load), every rank reports its outcome in one all-gather (`agree`,
`rank_reports`') instead of a barrier, and all go on, or all raise, together.
"""

from __future__ import annotations

import logging
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
    save_failure_kind,
)
from melissa_trainer.checkpoint.model_dtypes import warn_changed as warn_changed_dtypes
from melissa_trainer.checkpoint.replaced import begin_save
from melissa_trainer.common.refusal import elsewhere
from melissa_trainer.hooks import Event, Hook
from melissa_trainer.trainer import end_save
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
