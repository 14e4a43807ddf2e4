"""An error every rank meets, said once, not once per rank.

When the trainer refuses to start (`ConfigError`: an earlier run's checkpoints in
`output_dir`; `OutputDirLocked`: another trainer holds it), every rank learns the verdict
(rank 0 decides, a broadcast tells the others) and every rank raises, so that none waits
in a collective for a peer that has gone. Uncaught, each rank's exception would print
the same traceback: under ``accelerate launch --num_processes N``, N copies of one
message, then torchrun's own report. Rank 0 raises the error as it is; every other rank
raises `elsewhere`'s copy: an instance of the same class (``except ConfigError`` catches
it on every rank, with the same message and attributes) that is also a `SystemExit` with
code 1, which Python ends the process with, non-zero and silent, when nothing catches
it (as `preempted.Preempted` does).

A command line whose syntax is wrong (an unknown flag, a value of the wrong type) is
the other such error: every rank parses the same ``sys.argv``, before any process group
exists, so every rank meets the same error without being told. `config.parser` then
prints argparse's usage and error on rank 0 only (`launch_rank`, from the launcher's
environment), and every rank exits with argparse's status 2: the others raise
``elsewhere(SystemExit(2), rank)``, a `SystemExit` keeping its own code.
"""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = ["SaidOnRankZero", "elsewhere", "launch_rank", "said_once"]

#: where launchers put a process's global rank: torchrun (``accelerate launch``) sets
#: RANK; the MPI launchers' own names follow, in the order accelerate reads them
_RANK_VARIABLES = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")

E = TypeVar("E", bound=BaseException)


class SaidOnRankZero(SystemExit):
    """Mixed into the copy of a refusal a rank other than 0 raises (`elsewhere`): rank 0
    prints the error; uncaught here, it ends the process with exit code 1, silently."""


_QUIET: dict[type[BaseException], type[BaseException]] = {}  # class -> its quiet copy


def _quiet_class(cls: type[BaseException]) -> type[BaseException]:
    # (same name and module: a handler or a log that names the class sees the original)
    if issubclass(SaidOnRankZero, cls):  # (SystemExit itself: no class can list both)
        return SaidOnRankZero
    if cls not in _QUIET:
        names = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        _QUIET[cls] = type(cls.__name__, (cls, SaidOnRankZero), names)
    return _QUIET[cls]


def launch_rank() -> int:
    """This process's global rank as its launcher set it in the environment (the first
    of RANK, PMI_RANK, OMPI_COMM_WORLD_RANK, MV2_COMM_WORLD_RANK that is set), before
    any process group exists; 0 without a launcher, or with a value that is not an
    integer (then this process says its errors itself)."""
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def elsewhere(error: E, rank: int) -> E:
    """`error` on rank 0; on any other rank a copy of it (the same class and message, its
    attributes) that is also a `SaidOnRankZero`: raised uncaught, it exits without
    printing, rank 0 having printed the same error, with code 1, or the code of `error`
    if it is a `SystemExit` (argparse's 2)."""
    if rank == 0 or isinstance(error, SaidOnRankZero):
        return error
    cls = _quiet_class(type(error))
    quiet = cls.__new__(cls, *error.args)
    quiet.__dict__.update(error.__dict__)
    quiet.args = error.args
    code = error.code if isinstance(error, SystemExit) else 1
    quiet.code = code  # type: ignore[attr-defined]  # (SystemExit's: the exit status)
    return quiet  # type: ignore[return-value]  # (a subclass of type(error))


def said_once(error: E, rank: int) -> E:
    """`elsewhere`'s copy of `error` on every rank, rank 0's with its text as exit code
    (``ConfigError: ...``): uncaught, Python prints that one line and exits with code 1,
    not a traceback through `train()` and the trainer's internals that buries the
    message of a refused start; caught, it is the same class, message and attributes."""
    said = elsewhere(error, max(rank, 1))  # (a quiet copy, on rank 0 too)
    if rank == 0:
        said.code = f"{type(error).__name__}: {error}"  # type: ignore[attr-defined]
    return said
