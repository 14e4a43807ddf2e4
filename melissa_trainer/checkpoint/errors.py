"""Errors of checkpoints, each naming the checkpoint, the file and what to do.

* `CheckpointError`: a checkpoint cannot be resumed from: it does not verify against
  its manifest, or a file fails to load (`naming_file` turns the loaders' bare errors,
  `SafetensorError: incomplete metadata`, `EOFError`, `JSONDecodeError`,
  `UnpicklingError`..., into one that names the file and lists the checkpoints to
  resume from instead; files that read but do not fit this run, another model's, into
  one that says how to build the run alike or start afresh).
* `CheckpointSaveError`: a save failed (`describe_save_failure` says why; for a full
  disk, "No space left on device", the bytes needed and the bytes free).

Pure functions and context managers; no collective, no state.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from melissa_trainer.checkpoint import manifest
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.common.setting import setting
from melissa_trainer.config.arguments_file import ARGS_FILE

#: space errors a save may meet, and how they are named
_SPACE = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded"}
#: the errnos of a directory this process may not write (read-only, not its own)
_ACCESS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
#: a failed write with less free space than this is taken for a full disk, whatever the
#: error says (torch's zip writer reports one as "unexpected pos" or "iostream error")
_LOW_FREE = 1 << 20


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be resumed from. `path` is the checkpoint, `file` the
    file at fault (relative to it; None: the checkpoint as a whole)."""

    def __init__(self, message: str, path: Path, file: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.file = file


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written; its staging directory was removed and the
    checkpoints before it are intact. Raised on every rank (see `on_save_error`)."""


def others(path: Path) -> str:
    """The other checkpoints beside `path` that verify (`_verifies`), newest first, as a
    hint to resume from; when there are some but none verifies, that, and how to start
    afresh. Reads every file of the others (only on this error's path): a checkpoint
    damaged like `path` (a hook's file where the trainer's are, a byte changed) is not
    proposed."""
    candidates = [p for p in reversed(ckpt.list_checkpoints(path.parent)) if p != path]
    if not candidates:
        return "there is no other checkpoint under " + str(path.parent)
    found = [str(p) for p in candidates if _verifies(p)]
    if not found:
        return f"none of the other checkpoints under {path.parent} verifies either: {_AFRESH}"
    hint = setting("resume_from_checkpoint", "PATH", placeholder=True)
    return f"resume from another one with {hint}: " + ", ".join(found)


def _verifies(path: Path) -> bool:
    """Whether checkpoint `path` verifies against its manifest as a resume checks it
    (`trainer.checkpointing.verify`), on this process alone and for every rank's files:
    its name against its step, sizes, files of the trainer's that its manifest lacks,
    then hashes. One without a
    manifest (an earlier version's) counts as verifying: `latest` takes it, unverified."""
    try:
        entries = manifest.read(path)
    except ValueError:  # an unreadable manifest: a corrupt checkpoint
        return False
    if manifest.misnamed(path) is not None:  # (another step's state under this name)
        return False
    if entries is None:
        return True
    if manifest.check_sizes(path, entries):
        return False
    if any(not p.foreign for p in manifest.unexpected(path, entries)):
        return False
    return not manifest.check_hashes(path, entries)


#: the way to start afresh, the last resort of every checkpoint that does not fit
_AFRESH = (
    "start afresh: another --output_dir, or --overwrite_output_dir (which moves these "
    "checkpoints aside)"
)


def not_this_run(path: Path) -> str:
    """The hint for a checkpoint whose files read but do not fit this run: its model,
    optimizer or scheduler is built otherwise. The other checkpoints of the run that
    wrote it would not fit either, so none is offered; what is: build them as that run
    did, or start afresh."""
    return (
        "build the model, optimizer and scheduler as the run that wrote it did (its "
        f"settings: {path / ARGS_FILE}; a model's own options, its width or layers, are "
        f"your script's), or {_AFRESH}"
    )


@contextmanager
def naming_file(path: Path, files: Sequence[str]) -> Iterator[None]:
    """Re-raise any error of the block, which loads `files` (relative to checkpoint
    `path`, in the order it reads them), as a `CheckpointError` naming the file at
    fault: the first whose structure does not read (`probe`), else all of them (their
    bytes read, so their content does not fit this run: another model, say).
    The original error is chained, never swallowed."""
    try:
        yield
    except CheckpointError:
        raise
    except Exception as exc:
        bad = next(((f, why) for f in files if (why := probe(path / f)) is not None), None)
        file: str | None
        if bad is not None:
            file, why = bad
            message = f"cannot load {path / file}: {why}"
        else:
            file = None if len(files) != 1 else files[0]
            names = ", ".join(str(path / f) for f in files)
            if getattr(exc, "says_what_to_do", False):  # its own advice, which fits
                # better than the model's (`hooks.base.HookStateMismatch`: the hooks
                # differ, not the model; the checkpoint layer imports no hook)
                message = f"cannot load checkpoint {path} ({names}): {exc}; or {_AFRESH}"
            else:
                message = (
                    f"cannot load checkpoint {path} ({names}): "
                    f"{type(exc).__name__}: {exc}; the files read, but do not fit this run "
                    f"(another model, optimizer or version?): {not_this_run(path)}"
                )
            raise CheckpointError(message, path, file) from exc
        raise CheckpointError(f"{message}; {others(path)}", path, file) from exc


def probe(file: Path) -> str | None:
    """Why `file` does not read as its kind (by its suffix), or None if it does.
    Reads the structure only where that is cheap: a safetensors header, a JSON text,
    a torch file's zip directory and CRCs."""
    if not file.is_file():
        return "missing"
    if file.stat().st_size == 0:
        return "empty (0 bytes)"
    try:
        if file.suffix == ".json":
            json.loads(file.read_text())
        elif file.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(file), framework="numpy"):
                pass
        elif file.suffix in (".bin", ".pkl", ".pt"):  # torch.save's zip format
            with zipfile.ZipFile(file) as z:
                if (broken := z.testzip()) is not None:
                    return f"corrupt (bad CRC in {broken})"
    except Exception as exc:  # the reason is the answer, not an error here
        return f"{type(exc).__name__}: {exc}"
    return None


def describe_verification(path: Path, problems: Sequence[manifest.Problem]) -> str:
    """One line: what is wrong with checkpoint `path`, file by file."""
    return f"checkpoint {path} does not verify: " + "; ".join(
        f"{path / p.file}: {p.what}" for p in problems
    )


def describe_foreign(path: Path, files: Sequence[str]) -> str:
    """The warning for checkpoint `path`, resumed from, holding `files` (relative) that
    its manifest lacks where the loading never looks: not the trainer's state."""
    return (
        f"{path} holds files not in its manifest: {', '.join(files)}. They are not the "
        "trainer's (a hook's on_save writing into the checkpoint?): the checkpoint is "
        "resumed from, its own files verified, but these are not verified, and they go "
        "with the checkpoint when max_to_keep rotates it out. Write such artefacts "
        "beside the checkpoints (e.g. under output_dir/artefacts/checkpoint-STEP) to "
        "keep them, or accept that they are not verified"
    )


def none_verifies(root: Path, problems: Sequence[manifest.Problem]) -> str:
    """The error of ``resume_from_checkpoint='latest'`` when no checkpoint under `root`
    verifies, `problems` theirs: the fix for each kind of problem that has one
    (permissions, files mixed in, a newer version's manifest), and starting afresh only
    when a checkpoint is damaged (a file missing or changed), which no fix repairs."""
    whats = [p.what for p in problems]
    fixes = []
    if any("unreadable (" in w and "manifest" not in w for w in whats):
        fixes.append("make the unreadable files and folders readable (their permissions)")
    if any(w.startswith("unexpected") for w in whats):
        fixes.append(
            "move the files not in the manifest out of the checkpoints (not written by "
            "the save, they stand where the trainer reads its own files)"
        )
    if any("newer than this version" in w for w in whats):
        fixes.append("upgrade melissa-trainer")
    if any("as its name says" in w for w in whats):
        fixes.append("rename each checkpoint that holds another step than its name's")
    message = (
        f"resume_from_checkpoint='latest': no checkpoint under {root} verifies (see the "
        "warnings above; nothing was deleted)"
    )
    if fixes:
        message += "; to resume: " + "; ".join(fixes) + "; then resume again"
    if any(not _fixable(w) for w in whats):  # a file missing or changed: no fix repairs it
        message += (
            "; a checkpoint with a file missing or changed is damaged: resume from an "
            f"intact copy of one, or, to give up this run, {_AFRESH}"
        )
    return message


def _fixable(what: str) -> bool:
    return (
        ("unreadable (" in what and "manifest" not in what)
        or what.startswith("unexpected")
        or "newer than this version" in what
        or "as its name says" in what
    )


def is_full_disk(exc: BaseException, free: int, needed: int) -> str | None:
    """The name of the space error behind `exc` ("No space left on device"), or None.

    By errno anywhere in the chain of causes; else by the message (safetensors says
    "os error 28"); else, when no errno says otherwise (an EROFS is not a full disk), by
    the free space left: torch's writer loses the errno
    ("iostream error", "unexpected pos"), so a write that failed with less than
    `needed` bytes (at least 1 MiB) free is taken for a full disk.
    """
    seen: BaseException | None = exc
    other = False  # an errno that is not a space error: the low-free guess is not made
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _SPACE:
            return _SPACE[seen.errno]
        other |= isinstance(seen, OSError) and seen.errno is not None
        text = str(seen)
        for code, name in _SPACE.items():
            if name in text or f"os error {code})" in text:
                return name
        seen = seen.__cause__ or seen.__context__
    if other:  # (a read-only folder not made yet measures 0 bytes free: not full)
        return None
    if isinstance(exc, OSError | RuntimeError) and free < max(needed, _LOW_FREE):
        return _SPACE[errno.ENOSPC]
    return None


def save_failure_kind(exc: BaseException, said: str) -> str:
    """What fixes a failed save (`save_advice`): "access" for a directory that may not
    be written (EROFS, EACCES, EPERM anywhere in the chain of causes), "space" when
    `said` (its `describe_save_failure`) names a full disk, else "other". Never raises
    (it runs before every rank agrees on the failure, as `describe_save_failure`)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _ACCESS:
            return "access"
        seen = seen.__cause__ or seen.__context__
    return "space" if any(name in said for name in _SPACE.values()) else "other"


def save_advice(kinds: set[str], root: Path, previous: Path | None) -> str:
    """What to do after a save failed with the `kinds` of `save_failure_kind` (every
    rank's), in the checkpoint folder `root`; `previous` is the newest checkpoint."""
    latest = setting("resume_from_checkpoint", "latest")
    fixes = []
    if "space" in kinds:
        fixes.append(f"make room and resume with {latest}")
    if "access" in kinds:
        elsewhere = (
            f"resuming from {previous} by its path, "
            f"{setting('resume_from_checkpoint', 'PATH', placeholder=True)}"
            if previous is not None
            else "starting afresh"
        )
        fixes.append(
            f"make {root} writable (it is read-only, or not this user's) and resume with "
            f"{latest}, or train in a writable "
            f"{setting('output_dir', 'DIR', placeholder=True)}, {elsewhere}"
        )
    if "other" in kinds or not fixes:
        fixes.append(f"once the cause the error names is fixed, resume with {latest}")
    return "; ".join(fixes)


def describe_save_failure(
    exc: BaseException, staging: Path, final: Path, previous: Path | None, rank: int
) -> str:
    """One line on rank `rank`'s failure to write `staging` (to become `final`): for a
    full disk, "No space left on device", the bytes the checkpoint needs (the size of
    `previous`, the checkpoint before it, or what was written so far when larger) and
    the bytes free when it failed (its partial files included); for any other error,
    the error. Call before removing `staging`. Never raises: it runs on the failing rank
    before every rank agrees on the failure (`trainer.checkpointing.save_checkpoint`),
    and a rank that raised here would leave the others in that agreement; what cannot be
    measured (a file system that fails its listing too) leaves the error alone."""
    plain = f"rank {rank}: {type(exc).__name__}: {exc}"
    try:
        written = manifest.total_size(staging)
        needed = max(manifest.total_size(previous) if previous is not None else 0, written)
        where = staging if staging.exists() else staging.parent
        free = shutil.disk_usage(where).free if where.exists() else 0
    except OSError:
        return plain
    space = is_full_disk(exc, free, needed - written)
    if space is None:
        return plain
    estimate = f"the size of {previous.name}" if previous is not None else "written so far"
    return (
        f"rank {rank}: {space} writing {final.name} to {os.path.dirname(final)}: the "
        f"checkpoint needs about {needed} bytes ({_human(needed)}, {estimate}); {free} "
        f"bytes ({_human(free)}) were free when it failed"
    )


def _human(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


class FinalCheckpointSaveError(CheckpointSaveError):
    """The checkpoint of the step training ended at could not be written: raised on
    every rank once training has ended, whatever `on_save_error` (``"continue"`` trains
    on past a failed save; at the end there is nothing to train on, and the state of
    the steps after `saved_step` exists in this process alone). `step`: the step
    training ended at; `saved_step`: the step of the newest checkpoint on disk (None:
    none, a rerun starts afresh)."""

    def __init__(self, message: str, step: int, saved_step: int | None) -> None:
        super().__init__(message)
        self.step = step
        self.saved_step = saved_step
