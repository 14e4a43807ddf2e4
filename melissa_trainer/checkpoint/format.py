"""What a checkpoint is made of: named parts, each with its scope and files, and the
format version of the whole (`FORMAT_FILE`).

A part (`Part`) is the contract between the registry (`registry.parts`, the one list of
a trainer's parts) and the owner of a piece of state: its name, whose state it is
(`Scope`), the files it reads, how it is written, loaded and resharded. This module is
that vocabulary and the format file; it knows no trainer and writes no part.

Format versions: 1, every checkpoint without `FORMAT_FILE` (written before the
registry); 2, `FORMAT_FILE` present, and `TrainerState`'s ``samples_seen`` kept by the
per-rank ``trainer_rank`` part alone (it was also in ``trainer_state.json``). The
migrations of every record are in `common.migrations`.

Scope, and resuming on another number of ranks: a `Scope.GLOBAL` part is one copy,
identical on every rank, so it is read as it is on any number of ranks; a
`Scope.PER_RANK` part is each rank's own, and loads on another number of ranks through
its ``reshard`` (see `registry.load`). The parts and their scope are recorded in
`FORMAT_FILE` (`write_format`).

Thread-safety: pure, but for the files `write_format` writes and `format_of` reads.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.errors import naming_file
from melissa_trainer.checkpoint.files import read_json, write_json

__all__ = ["FORMAT_FILE", "FORMAT_VERSION", "Part", "Scope", "format_of", "write_format"]

#: the format version of a whole checkpoint, and the parts in it (main rank, at the root)
FORMAT_FILE = ckpt.FORMAT_FILE
FORMAT_VERSION = 2


class Scope(enum.Enum):
    """Whose state a part is (see the module docstring)."""

    #: one copy in the checkpoint, the same on every rank; written by the main rank
    GLOBAL = "global"
    #: each rank's own; written by each rank, under ``rank_R/`` (Accelerate's RNG file
    #: at the root, as Accelerate names it)
    PER_RANK = "per_rank"


@dataclass(frozen=True)
class Part:
    """One named part of a checkpoint.

    Attributes:
        name: the part's name (in `FORMAT_FILE`).
        scope: `Scope.GLOBAL` or `Scope.PER_RANK`.
        files: ``files(path, rank)``: the files the part reads of rank `rank`'s (this
            rank's when loading on the same number of ranks, every old rank's when
            resharding), relative to the checkpoint, in the order it reads them (a load
            error names the one at fault); a function of the checkpoint directory
            (Accelerate's depend on the optimizers).
        save: writes the part into the checkpoint (staging) directory given; None: the
            files are written by another part (the RNG files by Accelerate's).
        load: restores the part from the checkpoint directory given, of the format
            version given.
        collective: `save` runs on every rank, also for a `Scope.GLOBAL` part
            (Accelerate's `save_state`, which writes each rank's RNG file).
        names_file: `load` runs inside `naming_file` (its errors become a
            `CheckpointError` naming the file); False for a part whose own errors are
            meant as they are (the source's refusal of a changed study).
        reshard: restores this rank's share from a checkpoint written by another
            number of ranks: ``reshard(path, old_world_size, format_version)``, reading
            every old rank's files (`checkpoint.reshard`). Required of a
            `Scope.PER_RANK` part (a checkpoint of another world size is refused,
            naming the parts without one); for a `Scope.GLOBAL` part None means `load`
            as it is.
    """

    name: str
    scope: Scope
    files: Callable[[Path, int], list[str]]
    save: Callable[[Path], object] | None
    load: Callable[[Path, int], None]
    collective: bool = False
    names_file: bool = True
    reshard: Callable[[Path, int, int], None] | None = None


def write_format(staging: Path, registered: Sequence[Part]) -> None:
    """Write `FORMAT_FILE` into `staging` (the main rank's): `FORMAT_VERSION` and each
    part's scope, by name."""
    described = {part.name: part.scope.value for part in registered}
    write_json(staging / FORMAT_FILE, {"format_version": FORMAT_VERSION, "parts": described})


class FormatVersionError(ValueError):
    """A `FORMAT_FILE` whose version this code cannot read: a newer version's (the fix:
    upgrade), or none a version writes (the file damaged or edited). Its message says
    which and what to do, so `naming_file` adds only the way to start afresh, not the
    advice of a model that does not fit (the model is not at fault)."""

    #: read by `checkpoint.errors.naming_file`
    says_what_to_do = True


def format_of(path: Path) -> int:
    """The format version of checkpoint `path` (1: written before `FORMAT_FILE`).

    Raises:
        CheckpointError: a format newer than this code reads, one no version writes,
            or an unreadable file (`naming_file`, from a `FormatVersionError`).
    """
    file = path / FORMAT_FILE
    if not file.is_file():
        return 1
    with naming_file(path, [FORMAT_FILE]):
        version = read_json(file)["format_version"]
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise FormatVersionError(
                f"checkpoint format {version} is newer than this version of "
                f"melissa-trainer reads (formats 1 to {FORMAT_VERSION}): upgrade "
                "melissa-trainer to resume from it"
            )
        if not isinstance(version, int) or not 2 <= version <= FORMAT_VERSION:
            # 1 has no format file; below 1 or not an integer, no version wrote it
            raise FormatVersionError(
                f"format_version {version!r} is no format a version of melissa-trainer "
                f"writes (2 to {FORMAT_VERSION} in {FORMAT_FILE}; format 1 has no "
                f"{FORMAT_FILE}): the file is damaged or edited by hand; restore it "
                f"from a copy of the checkpoint"
            )
    return int(version)
