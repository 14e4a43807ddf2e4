"""Agreement between training ranks on when to stop.

Ranks receive different data, so one rank's stream may end long before another's,
and a hook may ask to stop on one rank only. DDP needs every rank to run the same
number of steps (each backward is a collective), so the ranks agree, once per window
of `stop_sync_steps` steps, on three numbers:

* whether any rank asked to stop,
* how many steps the window may run: the smallest number of batches any rank has in
  hand (every rank takes its window's batches from its buffer *before* agreeing, so a
  rank whose stream has ended reports fewer, and every rank runs exactly that many),
* whether any rank caught a preemption signal (`melissa_trainer.preemption`), as the
  signal's number (0: none): the largest wins, so SIGTERM (15) over SIGINT (2).

All three travel in one small integer tensor on the accelerator device, all-reduced
with MAX (the count negated), so the cost is one collective and one device-to-host
copy per window rather than per step. A fourth number rides along when the caller
gives one (a device scalar, reduced with MAX into `extra`): the trainer's loss check
(`melissa_trainer.loss_guard`), at no extra collective or sync. Every rank calls
`agree` at the same windows, so no rank ever runs a collective that another skips.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


class StopSync:
    """One all-reduce per window; a no-op without a process group.

    Not thread-safe: call from the training thread, on every rank, in lockstep.
    """

    def __init__(self, device: torch.device, num_processes: int) -> None:
        self.distributed = num_processes > 1 and dist.is_available() and dist.is_initialized()
        self._flag = torch.zeros(4, dtype=torch.int64, device=device)
        self.collectives = 0  # how many all-reduces were run (for tests and telemetry)
        #: the maximum over ranks of the last `agree`'s `extra` (None: none given)
        self.extra: int | None = None

    def agree(
        self,
        stop_requested: bool,
        batches_available: int,
        signum: int = 0,
        extra: torch.Tensor | None = None,
    ) -> tuple[bool, int, int]:
        """Return `(any rank asked to stop, fewest batches available on any rank, signal)`.

        `signum` is the preemption signal this rank caught (0: none); the returned one
        is the largest over ranks, 0 if no rank caught one. `extra`, an int64 device
        scalar, is reduced with MAX into `self.extra` (None without a process group).
        Blocks until every rank has called it (a collective).
        """
        self.extra = None
        if not self.distributed:
            return stop_requested, batches_available, signum
        local = torch.tensor([int(stop_requested), -batches_available, signum], dtype=torch.int64)
        self._flag[:3].copy_(local, non_blocking=True)
        if extra is None:
            self._flag[3:].zero_()
        else:
            self._flag[3:].copy_(extra.reshape(1))  # device to device: no sync
        dist.all_reduce(self._flag, op=dist.ReduceOp.MAX)
        self.collectives += 1
        values = self._flag.tolist()  # the one host sync of the window
        stop, neg_available, any_signum = values[:3]
        self.extra = None if extra is None else int(values[3])
        return bool(stop), -int(neg_available), int(any_signum)
