"""Who asked the ranks to stop, said on every rank: `ended_by_stop`.

A hook may set `control.should_stop` on one rank only; the stop agreement
(`core.stop_sync.StopSync`) stops every rank at the same step and tells every rank the
lowest rank that asked (`StopSync.stop_rank`, carried in the agreement's integer at no
cost). Rank 0 prints the end-of-run line, and it used to say only "stopped by a hook on
another rank": a user with a stop asked on rank 1 could not tell which hook, nor when.
The asking rank's words (`TrainerControl.stop_reason`: the hook's method, or
`request_stop`'s reason) and the step it asked at (`TrainerControl.stop_step`) are a
string: they come to the other ranks in one small broadcast from that rank, made once,
at the stop (never in a window that goes on), by every rank alike (each knows the same
`stop_rank` from the same agreement).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.trainer.stop_cause import StopCause

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["ended_by_stop", "stop_words"]

#: what a rank waits for in the broadcast (`WaitWatch`'s warning)
_WAITS_FOR = "the other ranks at the stop, for the words of the rank that asked (a broadcast)"


def stop_words(
    signum: int, control: TrainerControl, asker: tuple[int, str, int | None] | None = None
) -> str:
    """Why the ranks agreed to stop (`signum`: the preemption's `StopCause.code` they
    agreed on, 0: none), in words, for `OnlineTrainer.ended_by`: "stopped by SIGTERM",
    "stopped because the launcher (accelerate launch, pid N) is gone", or "stopped by a
    hook, " and the hook's reason (`TrainerControl.stop_reason`) on the rank whose hook
    asked. `asker`: another rank's (rank, reason, step) when that rank asked (the lowest
    that did: `ended_by_stop`), said as "stopped by a hook on rank 1, " and its reason and
    " (asked at step 5)"; without it, a rank that did not ask says that another rank did."""
    cause = StopCause.of(signum)
    if cause is not None:
        return cause.stopped
    if asker is not None:
        rank, reason, step = asker
        at = "" if step is None else f" (asked at step {step})"
        return f"stopped by a hook on rank {rank}, {reason or 'control.should_stop'}{at}"
    if control.should_stop:
        return f"stopped by a hook, {control.stop_reason or 'control.should_stop'}"
    return "stopped by a hook on another rank (control.should_stop)"


def ended_by_stop(trainer: OnlineTrainer, signum: int) -> str:
    """`stop_words` for the stop the ranks just agreed on (`signum` as there), with the
    asking rank's words when another rank asked. Collective when a hook's stop ends a run
    of several ranks (no signal): call it on every rank at the same agreement. The
    broadcast's failure (a rank gone meanwhile) raises as any collective's does."""
    control, sync = trainer.control, trainer.stop_sync
    rank = sync.stop_rank
    if signum or rank is None or not sync.distributed:
        return stop_words(signum, control)
    box: list[object] = [(control.stop_reason, control.stop_step)]
    with sync.watch.waiting(_WAITS_FOR):
        torch.distributed.broadcast_object_list(box, src=rank)
    if rank == sync.rank:
        return stop_words(signum, control)
    said: tuple[str, int | None] = box[0]  # type: ignore[assignment]
    return stop_words(signum, control, (rank, str(said[0]), said[1]))
