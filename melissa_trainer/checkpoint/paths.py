"""Checkpoint directories: naming, atomic commit, rotation, resolution of "latest",
an earlier run's folder moved aside.

Small pure functions on paths; what goes inside is `checkpoint.registry`'s (its named
parts, each written and read by its owner).

Atomicity contract: a checkpoint is written into a staging directory
(`.tmp-checkpoint-STEP`) and renamed to `checkpoint-STEP` only once every rank has
finished writing. A directory named `checkpoint-STEP` is therefore always complete; a
crash leaves at most a staging directory, which the next save at that step removes and
`list_checkpoints` ignores. Rotation deletes old checkpoints only after the new one is
in place, so there is always at least one complete checkpoint on disk; it never
deletes the checkpoint just written (`rotate`'s `keep`), even when checkpoints of later
steps exist (a run resumed from an older checkpoint, the newer ones being corrupt).

Verification: each checkpoint holds `manifest.json`, every file's size and hash,
written last (`melissa_trainer.checkpoint.manifest`); `trainer.resume_choice.resolve_resume`
resumes from the newest checkpoint that verifies.

Durability contract: before the rename, every file of the staging directory and the
directories themselves are fsynced (`fsync_rank_files`); after it, the parent
directories are fsynced (`commit`): `checkpoint.files` says why, and holds the fsyncs
and the JSON writes and reads.

Layout of one checkpoint::

    checkpoint-STEP/
      model.safetensors, optimizer.bin, scheduler/scaler/RNG files  (Accelerate's save_state)
      trainer_state.json        TrainerState
      hooks.json                state of the stateful hooks, by hook name
      training_args.json        the arguments of the run that wrote it (for reference)
      lr_scheduler.json         the learning-rate scheduler's class (null: none), and
                                the classes registered for checkpointing, in order
      format.json               the format version, and each part's name and scope
      manifest.json             every other file's size, SHA-256 and writing rank
      rank_R/                   one per training rank
        buffer.safetensors, buffer.json       buffer contents, counters, RNG, rate limiter
        pending.safetensors, pending.json     batches taken from the buffer, not yet trained
        source.json                           the source's state (e.g. the receiver's record)
        trainer_rank.json                     this rank's samples_seen and loss since the log
        simulation_losses.safetensors         per-simulation losses, this rank's unreduced

A checkpoint of k ranks resumes on any number of ranks: `count_ranks` says k, and each
`rank_R` part is then resharded (`checkpoint.registry`, `checkpoint.reshard`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from melissa_trainer.checkpoint.files import fsync_dir, fsync_file, fsync_tree
from melissa_trainer.common.checkpoint_names import PREFIX, latest_checkpoint, list_checkpoints
from melissa_trainer.core.state import STATE_FILE as TRAINER_STATE_FILE

__all__ = [
    "DELETING_PREFIX",
    "FORMAT_FILE",
    "NO_LATEST",
    "STAGING_PREFIX",
    "begin",
    "checkpoint_path",
    "commit",
    "count_ranks",
    "free_sibling",
    "fsync_rank_files",
    "move_aside",
    "rank_path",
    "remove_staging",
    "resolve_resume",
    "rng_file",
    "rotate",
    "staging_path",
]  # fmt: skip

STAGING_PREFIX = ".tmp-checkpoint-"
#: an old checkpoint being deleted by `rotate` (hidden from every listing first)
DELETING_PREFIX = ".deleting-"
#: the format version and parts of a checkpoint (`checkpoint.format`'s; here, its layout)
FORMAT_FILE = "format.json"

logger = logging.getLogger(__name__)


def checkpoint_path(root: str | os.PathLike[str], step: int) -> Path:
    """Where the checkpoint of `step` lives under `root`."""
    return Path(root) / f"{PREFIX}{step}"


def staging_path(root: str | os.PathLike[str], step: int) -> Path:
    """Where the checkpoint of `step` is written before it is committed."""
    return Path(root) / f"{STAGING_PREFIX}{step}"


def rank_path(checkpoint: str | os.PathLike[str], rank: int) -> Path:
    """The per-rank part of a checkpoint."""
    return Path(checkpoint) / f"rank_{rank}"


def count_ranks(checkpoint: str | os.PathLike[str]) -> int:
    """How many training ranks wrote `checkpoint`."""
    return sum(1 for p in Path(checkpoint).glob("rank_*") if p.is_dir())


#: the WARNING of "latest" with no checkpoint yet (%s: the checkpoints' folder), a
#: format kept whole so that an application may say it in its own words (heat_guess)
NO_LATEST = "resume_from_checkpoint='latest': no checkpoint under %s, starting afresh"


def resolve_resume(resume_from_checkpoint: str | None, root: str | os.PathLike[str]) -> Path | None:
    """Turn `TrainingArguments.resume_from_checkpoint` into a directory.

    "latest" gives the newest checkpoint under `root`, or None, with a warning, when
    there is none yet (a job script can always pass "latest", also on its first run).
    A path must exist.
    """
    if resume_from_checkpoint is None:
        return None
    if resume_from_checkpoint == "latest":
        latest = latest_checkpoint(root)
        if latest is None:
            logger.warning(NO_LATEST, root)
        return latest
    path = Path(resume_from_checkpoint)
    if not path.is_dir() or not (path / TRAINER_STATE_FILE).is_file():
        raise FileNotFoundError(
            f"resume_from_checkpoint={resume_from_checkpoint!r} is not a checkpoint directory "
            f"(no {TRAINER_STATE_FILE}); use 'latest' or one of: "
            f"{[str(p) for p in list_checkpoints(root)] or 'none yet'}"
        )
    return path


def move_aside(root: str | os.PathLike[str], now: float | None = None) -> Path:
    """Rename the checkpoint folder `root` to a free sibling
    ``{root}-previous-YYYYmmddTHHMMSSZ`` (``-2``, ``-3``... when taken) and return it.
    Main rank only. One rename (atomic on one file system), made durable; nothing in
    it is read, changed or deleted."""
    root = Path(root)
    target = free_sibling(root, "previous", now)
    os.rename(root, target)
    fsync_dir(target.parent)
    return target


def free_sibling(path: Path, what: str, now: float | None = None) -> Path:
    """A name beside `path` that nothing holds: ``{path}-{what}-YYYYmmddTHHMMSSZ`` (UTC
    at `now`; default the time now), with ``-2``, ``-3``... when taken. Not created."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    target = path.with_name(f"{path.name}-{what}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}-{what}-{stamp}-{n}")
    return target


def begin(root: str | os.PathLike[str], step: int) -> Path:
    """Create an empty staging directory for `step`, removing a stale one. Main rank only."""
    staging = staging_path(root, step)
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def remove_staging(staging: str | os.PathLike[str]) -> bool:
    """Remove the staging directory of a failed save; True when it was removed. Main
    rank only, once no rank writes into it. A failure to remove it is logged, not
    raised (the save's own error is the one to report): False; the next save of that
    step removes it, and it is never resumed from."""
    try:
        shutil.rmtree(staging)
    except OSError as exc:
        logger.warning("could not remove the partial checkpoint %s: %s", staging, exc)
        return False
    return True


def commit(staging: str | os.PathLike[str], final: str | os.PathLike[str]) -> Path:
    """Rename the finished `staging` directory to `final` atomically. Main rank only.

    An existing `final` (a checkpoint of the same step: written before a restart, or
    rewritten at a preemption with what came since) is replaced in one atomic exchange
    where the system can (`_exchange`: `final` never missing, the old one then removed);
    elsewhere it is first moved aside (``checkpoint-STEP.old``: a crash in between
    leaves it, which a resume puts back: `checkpoint.replaced`), then removed. One
    that cannot be removed (its permissions: a checkpoint that did not verify for that
    reason and was skipped on resume) is left aside with a warning: the save succeeded.
    """
    staging, final = Path(staging), Path(final)
    old = None
    if final.exists() and _exchange(staging, final):  # one atomic step: never none there
        old = staging  # (now the replaced checkpoint)
    else:
        if final.exists():
            old = _aside(final)
            os.replace(final, old)
        os.replace(staging, final)
    # the rename is durable once the directory holding the entry is on disk; the root
    # itself may have been created by this save (`begin`): its entry too
    fsync_dir(final.parent)
    fsync_dir(final.parent.parent)
    if old is not None:
        try:
            shutil.rmtree(old)
        except OSError as exc:  # the new checkpoint is in place: the save succeeded
            if old == staging:  # (out of the way of the next save of this step: `begin`)
                aside = _aside(final)
                os.replace(staging, aside)
                old = aside
            logger.warning(
                "saved %s, but could not remove the checkpoint it replaced, now %s (%s): "
                "remove it by hand",
                final,
                old,
                exc,
            )
    return final


def _aside(final: Path) -> Path:
    """Where the checkpoint `final` replaces goes: ``checkpoint-STEP.old`` (an earlier
    one there removed), or ``.old-N`` where that cannot be removed. No resume looks."""
    old = final.with_name(final.name + ".old")
    n = 0
    while old.exists():
        try:
            shutil.rmtree(old)
        except OSError as exc:  # left from an earlier save: put the new one beside it
            n += 1
            logger.warning("could not remove %s (%s): leaving it", old, exc)
            old = final.with_name(f"{final.name}.old-{n}")
    return old


def _exchange(a: Path, b: Path) -> bool:
    """Swap the directories `a` and `b` atomically (Linux's ``renameat2`` with
    ``RENAME_EXCHANGE``); False where the system or the file system cannot (then
    `commit` moves the old one aside first: a crash in between leaves it as
    ``checkpoint-STEP.old``, which the next resume puts back: `replaced`)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # (not glibc >= 2.28, not Linux)
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def rotate(
    root: str | os.PathLike[str], max_to_keep: int, keep: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Delete all but `max_to_keep` checkpoints, the lowest steps first; returns the
    deleted paths.

    `keep` (the checkpoint just written) is never deleted and counts as one of those
    kept. Why: after a resume from an older checkpoint (the newer ones did not verify),
    checkpoints of higher steps than the new one are still there; by step alone, the
    new one, the one checkpoint known to be intact, would be deleted first.

    Each is renamed ``.deleting-checkpoint-N`` before its files go (no listing sees a
    half-deleted checkpoint); what a killed rotation left so, the next one removes.
    """
    if max_to_keep < 1:
        raise ValueError(f"max_to_keep must be >= 1, got {max_to_keep}")
    for left in Path(root).glob(f"{DELETING_PREFIX}{PREFIX}*"):  # (a deletion cut short)
        shutil.rmtree(left)
    found = list_checkpoints(root)
    protected = [p for p in found if keep is not None and p == Path(keep)]
    others = [p for p in found if p not in protected]
    old = others[: max(0, len(found) - max_to_keep)]
    for path in old:
        # Out of every listing in one rename, then deleted: a process killed inside the
        # deletion left a half-deleted `checkpoint-N` listed (its manifest perhaps gone
        # first: then taken unverified, as a checkpoint of before manifests, by a resume
        # whose newer checkpoints all fail). The next rotation ends such a deletion.
        gone = path.with_name(DELETING_PREFIX + path.name)
        os.replace(path, gone)
        shutil.rmtree(gone)
    return old


def fsync_rank_files(
    staging: str | os.PathLike[str],
    rank: int,
    world_size: int,
    visit: Callable[[Path], None] | None = None,
) -> int:
    """fsync what training rank `rank` wrote into the `staging` checkpoint; returns the
    number of files. Every rank calls it once all ranks have written, before the commit.
    `visit(path)` is called for each file just before its fsync (the manifest's hasher:
    the file is still in the page cache then).

    Rank 0 syncs the shared files (model, optimizer, trainer state...) and its `rank_0`;
    another rank its `rank_R` and its RNG file (`random_states_R.pkl`, Accelerate's):
    on a shared file system only the node that wrote a file can flush it.
    """
    staging = Path(staging)
    if rank == 0:
        others = {rank_path(staging, r).name for r in range(1, world_size)}
        others |= {rng_file(r) for r in range(1, world_size)}
        return fsync_tree(staging, skip=others, visit=visit)
    files = fsync_tree(rank_path(staging, rank), visit=visit)
    rng = staging / rng_file(rank)
    if rng.is_file():
        if visit is not None:
            visit(rng)
        fsync_file(rng)
        files += 1
    return files


def rng_file(rank: int) -> str:
    """The RNG file of training rank `rank` in a checkpoint (as Accelerate's save_state
    names it)."""
    return f"random_states_{rank}.pkl"
