"""A refusal to start, said as one line: `refusals_end_the_program`, around a script's
trainer.

When the trainer refuses to start (`REFUSALS`: another trainer holds `output_dir`, or
a receiver's explicit port, an earlier run's checkpoints are there, a resume with other
study settings, no checkpoint to resume from verifies), the exception's message names
the cause and the fix. Uncaught, Python prints it under a traceback through the
trainer's internals (17 lines with ``python train.py``; under ``accelerate launch``, a
``[rank0]:`` traceback too). Inside
``with refusals_end_the_program():`` the program instead ends with that message on one
line of stderr, ``train.py: error: ...`` (as a bad command-line flag does), and exit
status 2::

    from melissa_trainer import OnlineTrainer, refusals_end_the_program

    with refusals_end_the_program():
        trainer = OnlineTrainer(model, args, optimizer, train_source=..., process_sample=...)
        trainer.train()

Only those refusals, and only before training starts: any other exception (a bug, a
failed simulation, a non-finite loss), and one of those classes raised once training
has run (`in_training`'s mark: a save whose checkpoint a hook's on_save spoiled, a
`CheckpointError`), propagates with its traceback. Under several ranks, rank 0 says
the refusal and the others end with the same status without repeating it: those holding
the quiet copy of rank 0's (`common.refusal.elsewhere`'s) as soon as rank 0 has said it
(its mark in the launcher's store: `refusal_mark`), those whose own code raised one (a
`ConfigError` of the script's, raised alike on every rank) when rank 0 said the same
line; a refusal of another rank alone is said by that rank. What the launcher prints
after a non-zero exit is its own: ``accelerate launch`` (torchrun) still follows the
line with its ``ChildFailedError`` summary of the failed ranks.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from melissa_trainer.checkpoint.errors import CheckpointError
from melissa_trainer.common.refusal import SaidOnRankZero, launch_rank
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.launcher.study_change import StudyChanged
from melissa_trainer.stream.receiver_socket import PortInUse
from melissa_trainer.trainer import refusal_mark
from melissa_trainer.trainer.lock_holder import OutputDirLocked

__all__ = ["REFUSALS", "REFUSED_STATUS", "in_training", "refusals_end_the_program"]

E = TypeVar("E", bound=BaseException)

#: what refuses to start a run, each naming the fix: a `ConfigError` (such as an earlier
#: run's checkpoints in `output_dir`), `OutputDirLocked` (another trainer using it),
#: `StudyChanged` (a resume with other study settings: sampler, bounds, a number of
#: simulations the design cannot take), `CheckpointError` (no checkpoint to resume
#: from verifies or loads) and `PortInUse` (a receiver's explicit port taken: another
#: study's on a shared node)
REFUSALS: tuple[type[Exception], ...] = (
    ConfigError,
    OutputDirLocked,
    StudyChanged,
    CheckpointError,
    PortInUse,
)
#: the exit status of a refused start: argparse's for a bad flag, which it resembles
REFUSED_STATUS = 2
#: at most, seconds a rank other than 0 waits, refused, for rank 0's word (its mark:
#: `refusal_mark`) before it exits (quiet) or says its own refusal; without a launcher's
#: store to carry the mark, the whole of it, for the launcher to end the rank first
#: (`refusals_end_the_program`). Read at each refusal: a test may raise it
QUIET_RANK_GRACE = 15.0


def in_training(error: E) -> E:
    """`error`, marked as raised once training has run: not a refusal to start, whatever
    its class (a `CheckpointError` of a save, not of a resume), so that
    `refusals_end_the_program` lets it propagate with its traceback."""
    error.in_training = True  # type: ignore[attr-defined]  # (read back by getattr)
    return error


def said_elsewhere(error: BaseException) -> bool:
    """Whether `error` is the quiet copy of a refusal that rank 0 says itself (a rank
    other than 0's, `common.refusal.elsewhere`); `said_once`'s copy on rank 0 carries
    its text as exit code and is said here."""
    return isinstance(error, SaidOnRankZero) and not isinstance(error.code, str)


def _line(error: BaseException) -> str:
    """The line a refusal is said as: ``PROGRAM: error: MESSAGE``, its lines joined."""
    message = " ".join(str(error).split("\n"))
    return f"{Path(sys.argv[0]).name}: error: {message}"


@contextlib.contextmanager
def refusals_end_the_program() -> Iterator[None]:
    """Around a script's trainer (its construction and `train()`): a refusal to start
    (`REFUSALS`) ends the program with ``PROGRAM: error: MESSAGE`` on one line of stderr
    (PROGRAM the script's name, the message's lines joined) and exit status 2
    (`REFUSED_STATUS`), instead of a traceback. Anything else propagates unchanged, a
    refusal's class raised once training has run (marked `in_training`) too.

    Under several ranks the line is said once, by rank 0, which then leaves it in the
    launcher's store (`refusal_mark`; ``accelerate launch``'s) and waits up to
    `refusal_mark.READ_WAIT` s for the other ranks to have read it. A rank other than 0:

    * holding the quiet copy of a refusal rank 0 says (`common.refusal.elsewhere`),
      exits 2 without printing as soon as rank 0's mark is there (or the store is
      gone: rank 0 has ended), at the latest after `QUIET_RANK_GRACE` s (no store to
      tell it: the launcher, which ends this rank once rank 0 has ended, usually comes
      first);
    * whose own code raised the refusal (a `ConfigError` of the user's, raised alike
      on every rank), waits up to `QUIET_RANK_GRACE` s for rank 0's mark and stays
      silent when rank 0 said the same line; otherwise (rank 0 said another, or nothing:
      a refusal of this rank alone) it says its own, then exits 2.

    A rank other than 0 held in a collective when rank 0 refused alone, which read rank
    0's mark there (`refusal_mark.read_while_held`), ends quiet with status 2 as well
    when that collective then fails (a RuntimeError: rank 0 exited).

    Blocks for those waits only (polling the store: a launcher's SIGTERM ends them).

    Raises:
        SystemExit: with code 2, on a refusal.
    """
    try:
        yield
    except REFUSALS as exc:
        if getattr(exc, "in_training", False):  # (a save's, mid-training: a bug to trace)
            raise
        if said_elsewhere(exc):
            # Rank 0 says it, after its own clean-up (the source stopped, the lock
            # released). A quiet rank that exited at once could make the launcher
            # (torchrun) SIGTERM rank 0 before its line: wait for rank 0's mark, left
            # once its line is out; bounded. Without a store to tell it, wait the grace
            # blind: the launcher ends this rank when rank 0 has ended, or the grace does
            mark = refusal_mark.await_mark(QUIET_RANK_GRACE, then=_quiet)
            if mark == refusal_mark.NO_STORE:
                threading.Event().wait(QUIET_RANK_GRACE)
        else:
            line = _line(exc)
            if launch_rank() == 0:
                print(line, file=sys.stderr, flush=True)
                refusal_mark.leave(line)  # (then waits, briefly, for the others to read it)
            else:

                def say(mark: str | None) -> None:  # (then rank 0 is told it was read)
                    if mark != line:
                        print(line, file=sys.stderr, flush=True)  # (not what rank 0 said)

                refusal_mark.await_mark(QUIET_RANK_GRACE, then=say)
        raise SystemExit(REFUSED_STATUS) from None
    except RuntimeError:  # (torch's DistError, gloo's and NCCL's failures are)
        if launch_rank() == 0 or not refusal_mark.read_while_held():
            raise
        # Rank 0 refused alone, its line said, while this rank was held in a collective
        # it never joins; this rank read its mark, so the collective's failure as rank 0
        # exits is that refusal's. Its traceback ("Connection closed by peer") said
        # nothing of it, and this rank's exit 1 could reach the launcher before rank 0's
        # 2: torchrun then named it the root cause and SIGTERMed rank 0. Quiet, as a
        # rank holding rank 0's refusal's copy ends.
        raise SystemExit(REFUSED_STATUS) from None


def _quiet(mark: str | None) -> None:
    """A quiet rank says nothing of rank 0's mark (`await_mark`'s `then`: rank 0 is
    told it was read over the connection it was read on)."""
