"""A checkpoint's manifest: every file's relative path, size and hash, and its checks.

Contract (see `trainer.checkpointing.save_checkpoint`, which does the collective part):

* Each training rank hashes the files it wrote (`Hasher`, handed each file by
  `fsync_rank_files` just before its fsync, while the bytes are still in the page
  cache: no extra read from the device; hashed in a few threads, overlapping the
  fsyncs and each other), in parallel across ranks, so no node reads another node's
  files (on a shared file system that would be a network read of every rank's buffer
  by one node). The main rank gathers the entries and writes
  `MANIFEST` into the staging directory *last*, fsyncs it, and only then is the
  directory renamed. A crash before that rename leaves a staging directory, which
  is never resumed from; so a `checkpoint-STEP` with a manifest has all of it.
* A checkpoint without `MANIFEST` was written by a version before manifests: it is
  *unverified* (accepted with a warning, see `trainer.resume_choice.resolve_resume`).
* Verification is split like the writing: each rank checks the entries that its
  rank wrote (`owned_by`; on fewer ranks than wrote it, the missing ranks' dealt out
  in turn), sizes first (`check_sizes`: a stat per file), then hashes
  (`check_hashes`: reads each file, which loading does next anyway, from the page
  cache then); the main rank also looks for files no rank wrote (`unexpected`): one
  where the loading looks for the trainer's own files fails the verification (it
  would be read unverified); any other is *foreign* (a hook's artefact written into
  the checkpoint in `on_save`), not the trainer's state: it is warned about, not
  refused.

All functions here are pure or touch only the files they are given; none is a
collective. The hash is SHA-256 (OpenSSL's, through hashlib, which releases the GIL
while it hashes), streamed in 1 MiB chunks: CPUs with SHA extensions (x86 since AMD
Zen and Intel Ice Lake, ARMv8) run it in hardware; a checkpoint is not an adversary,
any strong hash detects accidental damage (its speed against BLAKE2b: docs/measured.md,
"Design choices, measured").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from melissa_trainer.checkpoint.paths import FORMAT_FILE
from melissa_trainer.common.checkpoint_names import PREFIX
from melissa_trainer.core.state import STATE_FILE

#: the manifest's file name, directly under the checkpoint directory
MANIFEST = "manifest.json"
#: the manifest's format: a reader refuses a newer one rather than misread it
FORMAT = 1
_CHUNK = 1 << 20
#: a checkpoint's name, its step in it
_NAMED = re.compile(rf"{re.escape(PREFIX)}(\d+)")
HASH = "sha256"
#: threads hashing one rank's files while it fsyncs them
_WORKERS = 4

#: what the loading may read under a checkpoint, by its first path component: a file of
#: these names that the manifest does not list would be read unverified (or, a
#: ``rank_*`` folder, change the count of ranks that wrote it: `paths.count_ranks`), so
#: it fails the verification. The trainer's files (`registry`), Accelerate's
#: (`load_state` reads some only when present: ``model.safetensors`` before
#: ``pytorch_model.bin``, ``dl_state_dict.bin``), every ``rank_*``; kept in step with
#: what a checkpoint holds by tests/checkpoint/test_foreign_files.py.
OWN_NAMES = re.compile(
    r"rank_.*|(model|pytorch_model)(_\d+)?\.(safetensors|bin)"
    r"|(optimizer|scheduler|sampler|dl_state_dict)(_\d+)?\.bin|scaler\.pt"
    r"|random_states_\d+\.pkl|custom_checkpoint_\d+\.pkl"
    r"|(format|trainer_state|hooks|training_args|manifest|lr_scheduler)\.json"
)

#: one file's entry: {"size": bytes, "sha256": hex digest, "rank": the rank that wrote it}
Entry = dict[str, Any]


@dataclass(frozen=True)
class Problem:
    """What is wrong with one file of a checkpoint: `file` relative to it. A `foreign`
    one (a file not in the manifest, where the loading never looks) does not fail the
    verification: it is not the trainer's state."""

    file: str
    what: str
    foreign: bool = False

    def __str__(self) -> str:
        return f"{self.file}: {self.what}"


def hash_file(path: str | os.PathLike[str]) -> tuple[int, str]:
    """`(size in bytes, SHA-256 hex digest)` of the file at `path`, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb", buffering=0) as f:
        chunk = bytearray(_CHUNK)
        view = memoryview(chunk)
        while n := f.readinto(view):
            digest.update(view[:n])
            size += n
    return size, digest.hexdigest()


class Hasher:
    """The entries of the files one rank wrote under `root`: call it with each file
    (`fsync_rank_files`' `visit`), which is hashed in a thread, then `finish()`."""

    def __init__(self, root: str | os.PathLike[str], rank: int) -> None:
        self.root = Path(root)
        self.rank = rank
        self.entries: dict[str, Entry] = {}
        self._pending: dict[str, Future[tuple[int, str]]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __call__(self, path: Path) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="checkpoint-hash")
        rel = path.relative_to(self.root).as_posix()
        self._pending[rel] = self._pool.submit(hash_file, path)

    def finish(self) -> dict[str, Entry]:
        """Wait for every file's hash; returns `entries`. An error hashing a file
        (it vanished, say) is raised here, after the other threads are done."""
        try:
            for rel, future in self._pending.items():
                size, digest = future.result()
                self.entries[rel] = {"size": size, HASH: digest, "rank": self.rank}
        finally:
            self._pending.clear()
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None
        return self.entries


def write(staging: str | os.PathLike[str], entries: Mapping[str, Entry], step: int) -> Path:
    """Write the manifest of `entries` into `staging` and fsync it and the directory.
    Main rank only, after every rank's files are written and synced: last before the
    rename. Idempotent (rewrites the same file)."""
    path = Path(staging) / MANIFEST
    files = dict(sorted(entries.items()))
    body = {"format": FORMAT, "step": step, "hash": HASH, "files": files}
    with open(path, "w") as f:
        json.dump(body, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(staging, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read(checkpoint: str | os.PathLike[str]) -> dict[str, Entry] | None:
    """The entries of `checkpoint`'s manifest, or None when it has none (written by an
    earlier version). Raises `ValueError` naming the manifest when it is unreadable
    (its permissions, or its checkpoint directory's, a directory in its place...),
    malformed or of a newer format, or missing where `FORMAT_FILE` is there: the
    checkpoint is then a corrupt one. (`FORMAT_FILE` came after manifests: a version
    that writes it writes a manifest; one missing then is a bad copy's, whose other
    files may be missing too, some of which the loading does without, silently.)"""
    path = Path(checkpoint) / MANIFEST
    try:
        text = path.read_text()
    except FileNotFoundError:
        if (Path(checkpoint) / FORMAT_FILE).is_file():  # (not an earlier version's)
            raise ValueError(
                f"{path}: missing, though {FORMAT_FILE} is there (written by a version that "
                "writes a manifest: a partial copy, or the manifest deleted)"
            ) from None
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"{path}: unreadable manifest ({why})") from exc
    try:
        body = json.loads(text)
        if not isinstance(body, dict) or not isinstance(body.get("files"), dict):
            raise ValueError("no 'files' mapping")
        if body.get("format", 0) > FORMAT:
            raise ValueError(
                f"format {body['format']} is newer than this version's ({FORMAT}): upgrade "
                "melissa-trainer to resume from it"
            )
        files: dict[str, Entry] = body["files"]
        for rel, entry in files.items():
            if not {"size", HASH, "rank"} <= set(entry):
                raise ValueError(f"the entry of {rel} lacks size, {HASH} or rank")
    except ValueError as exc:  # JSONDecodeError included
        raise ValueError(f"{path}: unreadable manifest ({exc})") from exc
    return files


def misnamed(checkpoint: str | os.PathLike[str]) -> Problem | None:
    """A `Problem` when `checkpoint`'s name, ``checkpoint-N``, is not the step it holds
    (its manifest's ``step``; without a manifest, an earlier version's, its
    ``trainer_state.json``'s ``global_step``); None when they agree, when the name is
    not of that form (a path the user chose) or when the step cannot be read (the
    manifest's and the files' checks say why).

    Why: ``latest`` takes the highest step by name. A checkpoint renamed, or copied over
    by a sync tool or a bad copy, to a higher step (``checkpoint-30`` holding step 20's
    state) was taken over the real newest one, and the run resumed at step 20 while the
    name said 30; each requeue took it again (its saves of 21 to 29 never the newest by
    name), and the next save of step 30 replaced it: work lost, nothing said."""
    path = Path(checkpoint)
    named = _NAMED.fullmatch(path.name)
    if named is None:
        return None
    file, key = MANIFEST, "step"
    try:
        body = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:  # (an earlier version's: its trainer state says)
        file, key = STATE_FILE, "global_step"
        try:
            body = json.loads((path / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
    except (OSError, ValueError):
        return None
    held = body.get(key) if isinstance(body, dict) else None
    if not isinstance(held, int) or held == int(named.group(1)):
        return None
    return Problem(
        file,
        f"holds step {held}, not step {named.group(1)} as its name says (renamed, or "
        f"copied over from another checkpoint): rename it checkpoint-{held} to resume from it",
    )


def owned_by(entries: Mapping[str, Entry], rank: int, world_size: int) -> dict[str, Entry]:
    """The entries rank `rank` of a run of `world_size` ranks verifies: those written by
    the ranks ``r`` with ``r % world_size == rank`` (its own rank's on the same number
    of ranks; on fewer, the ranks this run lacks dealt out in turn): every entry is
    verified by exactly one rank, whatever the number of ranks that resumes. (On more
    ranks, those the checkpoint lacks verify nothing; resharding then reads every old
    rank's files it loads, after the verification.)"""
    return {rel: e for rel, e in entries.items() if int(e["rank"]) % world_size == rank}


def check_sizes(checkpoint: str | os.PathLike[str], entries: Mapping[str, Entry]) -> list[Problem]:
    """Missing files, files that cannot be looked at (in a folder that cannot be
    searched, say) and size mismatches among `entries`: one stat per file (a file that
    cannot be read is found by `check_hashes`)."""
    problems = []
    for rel, entry in entries.items():
        path = Path(checkpoint) / rel
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            problems.append(Problem(rel, "missing"))
            continue
        except OSError as exc:
            problems.append(Problem(rel, _unreadable(exc)))
            continue
        if size != entry["size"]:
            problems.append(
                Problem(rel, f"size mismatch: {size} bytes, the manifest says {entry['size']}")
            )
    return problems


def check_hashes(checkpoint: str | os.PathLike[str], entries: Mapping[str, Entry]) -> list[Problem]:
    """Hash mismatches among `entries` (reads every file: call after `check_sizes`)."""
    problems = []
    for rel, entry in entries.items():
        try:
            _, digest = hash_file(Path(checkpoint) / rel)
        except OSError as exc:
            problems.append(Problem(rel, _unreadable(exc)))
            continue
        if digest != entry[HASH]:
            problems.append(Problem(rel, "hash mismatch: its bytes changed after it was written"))
    return problems


def unexpected(checkpoint: str | os.PathLike[str], entries: Iterable[str]) -> list[Problem]:
    """Files under `checkpoint` that no rank wrote (not in the manifest, nor it), and
    folders that cannot be listed (what they hold cannot be checked).

    Why it exists: the manifest is written last, so every file of a checkpoint as saved
    is in it; a file of the trainer's (`OWN_NAMES`) that is not means the directory is
    not the checkpoint that was written (files of another save mixed in, a ``rank_*``
    folder that would change the count of ranks), which loading would read unverified:
    a problem. Any other such file is `foreign` (a hook's artefact, written into the
    checkpoint in `on_save` as Hugging Face callbacks do): never read by the loading,
    it says nothing of the trainer's state, and does not fail the verification."""
    root = Path(checkpoint)
    known = set(entries) | {MANIFEST}
    found = []

    def unlisted(exc: OSError) -> None:  # os.walk would skip the folder silently
        where = Path(exc.filename).relative_to(root).as_posix() if exc.filename else "."
        found.append(Problem(where, f"folder {_unreadable(exc)}"))

    holders = {rel.split("/", 1)[0] for rel in known if "/" in rel}  # (folders written)
    for top, folders, names in os.walk(root, onerror=unlisted):
        if top == str(root):  # an empty ``rank_*`` folder counts a rank too (the loading's;
            # one with files is named by its files, below)
            found += [
                Problem(
                    f"{name}/",
                    "unexpected folder: not in the manifest, where the trainer's own are",
                )
                for name in folders
                if name not in holders
                and OWN_NAMES.fullmatch(name)
                and not any(p.is_file() for p in (root / name).rglob("*"))
            ]
        for name in names:
            rel = (Path(top) / name).relative_to(root).as_posix()
            if rel in known:
                continue
            if OWN_NAMES.fullmatch(rel.split("/", 1)[0]):
                found.append(
                    Problem(
                        rel, "unexpected: not in the manifest, where the trainer's own files are"
                    )
                )
            else:
                found.append(Problem(rel, "not in the manifest (not verified)", foreign=True))
    return sorted(found, key=lambda p: p.file)


def _unreadable(exc: OSError) -> str:
    return f"unreadable ({exc.strerror or exc})"


def total_size(checkpoint: str | os.PathLike[str]) -> int:
    """Bytes of the files under `checkpoint` (0 if it does not exist). A file gone
    between the listing and its size counts 0: another rank may be writing into the
    same staging directory (a file written aside, then renamed) while this one, whose
    save failed, measures it (`errors.describe_save_failure`)."""
    total = 0
    for top, _, names in os.walk(checkpoint):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(top, name))
            except FileNotFoundError:
                continue
    return total
