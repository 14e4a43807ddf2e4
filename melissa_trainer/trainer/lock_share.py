"""Rank 0's lock of `output_dir`, told to every rank as the trainer is made
(`lock_output_dir`: rank 0 takes the lock of `output_lock`, one broadcast tells every
rank whether it got it, and the run id).

The broadcast is watched (`core.wait_watch`, the trainer's `StopSync.watch`, given by
`setup.claim_output_dir`): a rank held there for long (rank 0 waiting for a trainer
stopping in `output_dir`, a rank slow to build its trainer, or one stopped or hung)
warns with `LOCK_USUAL` instead of waiting silently until the process group's timeout.
The watch is the one the trainer is made with: its bound is the default one
(`DEFAULT_FIRST_WARNING`), a bound set on `trainer.stop_sync.watch` afterwards comes too
late for this wait.
"""

from __future__ import annotations

import logging
import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from melissa_trainer.common.refusal import elsewhere
from melissa_trainer.core.wait_watch import WaitWatch
from melissa_trainer.core.wait_words import LOCK_USUAL
from melissa_trainer.trainer.lock_holder import LOCK_FILE, OutputDirLocked, peek_holder
from melissa_trainer.trainer.output_dir_errors import ENV_OUTPUT_LOCK, make_output_dir
from melissa_trainer.trainer.output_lock import OutputDirLock
from melissa_trainer.trainer.run_id import new_run_id

__all__ = ["lock_disabled", "lock_output_dir"]

logger = logging.getLogger("melissa_trainer.trainer.output_lock")  # (its words, as before)

#: what a rank held at the broadcast waits for (the watch's warnings)
_WAITS_FOR = (
    "the other ranks at output_dir's lock, as the trainer is made (a broadcast from rank 0)"
)


def lock_disabled() -> bool:
    """True when ``MELISSA_TRAINER_OUTPUT_LOCK=off`` (the lock is skipped, with a warning)."""
    value = os.environ.get(ENV_OUTPUT_LOCK, "").strip().lower()
    if value in ("", "on"):
        return False
    if value == "off":
        return True
    raise ValueError(f"{ENV_OUTPUT_LOCK}={value!r}: use 'on' (the default) or 'off'")


def lock_output_dir(
    output_dir: str, rank: int, world_size: int, device: Any, watch: WaitWatch | None = None
) -> tuple[OutputDirLock | None, str]:
    """Rank 0 takes `output_dir`'s lock and makes the run id; every rank gets the run id.

    A collective when `world_size` > 1 (every rank calls it, with the process group up):
    rank 0 broadcasts whether it got the lock, so that every rank fails when it did not
    (no rank waits for a peer that has gone), inside `watch`'s wait when given (the
    trainer's: module docstring). Returns rank 0's `OutputDirLock` (None on the other
    ranks, and with ``MELISSA_TRAINER_OUTPUT_LOCK=off``) and the run id.

    Raises:
        OutputDirLocked: another trainer holds the directory (on every rank; on ranks
            other than 0 a silent copy, `refusal.elsewhere`: rank 0 prints it).
        OSError: rank 0 cannot lock (the file system refuses locks) or cannot create
            `output_dir` (`output_dir_errors.make_output_dir`, also with the lock off); the
            other ranks raise RuntimeError pointing at rank 0's error (silent, as above).
    """
    lock: OutputDirLock | None = None
    run_id = new_run_id()
    error: BaseException | None = None
    status = _LOCKED
    if rank == 0:
        try:
            if lock_disabled():
                logger.warning(
                    "%s=off: output_dir %r is not locked; nothing stops another trainer "
                    "from using it",
                    ENV_OUTPUT_LOCK,
                    output_dir,
                )
                make_output_dir(output_dir)  # (as the lock would: a clear error if it cannot)
            else:
                lock = OutputDirLock(output_dir, run_id)
                lock.acquire()
        except OutputDirLocked as exc:
            error, status = exc, _REFUSED
        except BaseException as exc:
            error, status = exc, _FAILED
    if world_size > 1:
        waiting: AbstractContextManager[None] = (
            nullcontext() if watch is None else watch.waiting(_WAITS_FOR, LOCK_USUAL)
        )
        with waiting:
            status, run_id = _share(status, run_id, device)
    if error is not None:
        raise error
    # (the other ranks' errors are said by rank 0's alone: `refusal`)
    if status == _REFUSED:
        locked = OutputDirLocked(output_dir, peek_holder(Path(output_dir) / LOCK_FILE))
        raise elsewhere(locked, rank)
    if status == _FAILED:
        failed = RuntimeError(
            f"rank 0 could not lock output_dir {output_dir!r}: see rank 0's error"
        )
        raise elsewhere(failed, rank)
    return lock, run_id


_LOCKED, _REFUSED, _FAILED = 1, 0, 2


def _share(status: int, run_id: str, device: Any) -> tuple[int, str]:
    """Rank 0's status and run id, on every rank (a broadcast of two integers)."""
    import torch
    import torch.distributed as dist

    value = int(run_id, 16)
    signed = value - (1 << 64) if value >= 1 << 63 else value
    shared = torch.tensor([status, signed], dtype=torch.int64, device=device)
    dist.broadcast(shared, src=0)
    status, signed = (int(v) for v in shared.tolist())
    return status, f"{signed % (1 << 64):016x}"
