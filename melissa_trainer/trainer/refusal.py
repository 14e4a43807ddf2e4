"""A start-up refusal said once, not once per rank.

When the trainer refuses to start (`ConfigError`: an earlier run's checkpoints in
`output_dir`; `OutputDirLocked`: another trainer holds it), every rank learns the verdict
(rank 0 decides, a broadcast tells the others) and every rank raises, so that none waits
in a collective for a peer that has gone. Uncaught, each rank's exception would print
the same traceback: under ``accelerate launch --num_processes N``, N copies of one
message, then torchrun's own report. Rank 0 raises the error as it is; every other rank
raises `elsewhere`'s copy: an instance of the same class (``except ConfigError`` catches
it on every rank, with the same message and attributes) that is also a `SystemExit` with
code 1, which Python ends the process with, non-zero and silent, when nothing catches
it (as `preemption.Preempted` does).
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["SaidOnRankZero", "elsewhere"]

E = TypeVar("E", bound=BaseException)


class SaidOnRankZero(SystemExit):
    """Mixed into the copy of a refusal a rank other than 0 raises (`elsewhere`): rank 0
    prints the error; uncaught here, it ends the process with exit code 1, silently."""


_QUIET: dict[type[BaseException], type[BaseException]] = {}  # class -> its quiet copy


def _quiet_class(cls: type[BaseException]) -> type[BaseException]:
    # (same name and module: a handler or a log that names the class sees the original)
    if cls not in _QUIET:
        names = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        _QUIET[cls] = type(cls.__name__, (cls, SaidOnRankZero), names)
    return _QUIET[cls]


def elsewhere(error: E, rank: int) -> E:
    """`error` on rank 0; on any other rank a copy of it (the same class and message, its
    attributes) that is also a `SaidOnRankZero`: raised uncaught, it exits with code 1
    without printing, rank 0 having printed the same error."""
    if rank == 0 or isinstance(error, SaidOnRankZero):
        return error
    cls = _quiet_class(type(error))
    quiet = cls.__new__(cls, *error.args)
    quiet.__dict__.update(error.__dict__)
    quiet.args = error.args
    quiet.code = 1  # type: ignore[attr-defined]  # (SystemExit's: the exit status)
    return quiet  # type: ignore[return-value]  # (a subclass of type(error))
