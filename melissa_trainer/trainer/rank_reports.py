"""Every rank's outcome, on every rank: `agree` (one all-gather), `from_main` (one
broadcast of the main rank's value), and `attempt` (an action's exception, to report).

No rank ever waits in a collective that another rank skipped: where a step may fail on
one rank (a checkpoint's write or load, `checkpointing`), every rank runs its part with
`attempt`, reports its outcome with `agree` instead of a barrier, and all go on, or all
raise, together. Without torch.distributed (one process) each returns at once.

Each collective is watched (`core.wait_watch`, the trainer's one watch: `StopSync.watch`):
a rank held in one for long (another rank stopped, hung, or slow to write its files) warns,
naming where it waits (`at`, e.g. "checkpoint-40's save, after every rank wrote its files").
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from melissa_trainer.core.wait_words import CHECKPOINT_USUAL

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["agree", "attempt", "from_main", "watched"]

T = TypeVar("T")


def attempt(action: Callable[[], object] | None) -> BaseException | None:
    """Run `action` (None: nothing to do on this rank); its exception, or None."""
    try:
        if action is not None:
            action()
    except Exception as exc:  # reported to every rank by the caller, then raised or logged
        return exc
    return None


def agree(trainer: OnlineTrainer, report: T, at: str) -> list[T]:
    """Every rank's `report`, in rank order, on every rank (one all-gather; a barrier).
    `at` names the point, for the watch's warning (e.g. "checkpoint-40's save, after
    every rank wrote its files")."""
    if not trainer.stop_sync.distributed:
        return [report]
    reports: list[Any] = [None] * trainer.num_processes
    with watched(trainer, "all-gather", at):
        torch.distributed.all_gather_object(reports, report)
    return reports


def from_main(trainer: OnlineTrainer, value: T, at: str) -> T:
    """The main rank's `value`, on every rank (one broadcast); `at` as `agree`'s."""
    if not trainer.stop_sync.distributed:
        return value
    box = [value]
    with watched(trainer, "broadcast from rank 0", at):
        torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def watched(trainer: OnlineTrainer, collective: str, at: str) -> AbstractContextManager[None]:
    """The trainer's wait watch (`StopSync.watch`) around a checkpoint's `collective`
    (its kind: "all-gather"...) at `at`: a long wait warns with `CHECKPOINT_USUAL`."""
    what = f"the other ranks at {at} (a checkpoint's {collective})"
    return trainer.stop_sync.watch.waiting(what, CHECKPOINT_USUAL)
