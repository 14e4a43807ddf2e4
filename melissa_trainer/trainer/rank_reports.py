"""Every rank's outcome, on every rank: `agree` (one all-gather), `from_main` (one
broadcast of the main rank's value), and `attempt` (an action's exception, to report).

No rank ever waits in a collective that another rank skipped: where a step may fail on
one rank (a checkpoint's write or load, `checkpointing`), every rank runs its part with
`attempt`, reports its outcome with `agree` instead of a barrier, and all go on, or all
raise, together. Without torch.distributed (one process) each returns at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["agree", "attempt", "from_main"]

T = TypeVar("T")


def attempt(action: Callable[[], object] | None) -> BaseException | None:
    """Run `action` (None: nothing to do on this rank); its exception, or None."""
    try:
        if action is not None:
            action()
    except Exception as exc:  # reported to every rank by the caller, then raised or logged
        return exc
    return None


def agree(trainer: OnlineTrainer, report: T) -> list[T]:
    """Every rank's `report`, in rank order, on every rank (one all-gather; a barrier)."""
    if not trainer.stop_sync.distributed:
        return [report]
    reports: list[Any] = [None] * trainer.num_processes
    torch.distributed.all_gather_object(reports, report)
    return reports


def from_main(trainer: OnlineTrainer, value: T) -> T:
    """The main rank's `value`, on every rank (one broadcast)."""
    if not trainer.stop_sync.distributed:
        return value
    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]
