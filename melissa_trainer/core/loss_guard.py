"""A non-finite training loss stops training before it reaches a checkpoint.

One NaN (a sample that holds one, or a diverging solver's huge finite values, whose
squares overflow; a learning rate too high, a division by zero in a loss) makes every
later loss and weight NaN, and every later checkpoint worthless: a resume could not
recover. `LossGuard` keeps each micro-batch's loss tensor, on the
device, by reference (no device operation and no host sync per step: the losses are
stacked into one tensor only when they are checked) with, on the host, its step and
the simulations of its batch, and checks them at points where the host waits for the
device anyway or where it must:

* at each stop synchronisation (every `stop_sync_steps` steps) under several ranks:
  the index of the first non-finite loss recorded so far rides in the stop flag's
  all-reduce (`StopSync.start`), so every rank learns it at once, at no extra
  collective or sync, when the trainer reads that agreement: one window later (a
  non-finite loss of window k raises at the end of window k+1, unless a log, a
  validation or a checkpoint checked first);
* before a log, a validation or a checkpoint (`OnlineTrainer._perform_requested_actions`),
  at the end of the loop, and in every `save_checkpoint` (which also checks the
  weights: an update from a non-finite gradient leaves the last loss finite), one
  small all-reduce under several ranks and one device-to-host copy;
* when `limit` micro-batches are unchecked (single process with rare logs), so that
  the host record stays bounded.

A non-finite value raises `NonFiniteLossError` on every rank at the same point (each
check is collective and agrees on the earliest step), naming the step and the
simulations of the batch (when samples carry ``simulation_id``, as the stream's do).
No checkpoint is written from then on, so the newest on disk holds finite weights.

Not thread-safe: the training thread, every rank in lockstep.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from melissa_trainer.core.simulation_ids import simulation_ids

__all__ = ["LIMIT", "LossGuard", "NonFiniteLossError"]

#: micro-batches recorded before a check is forced (bounds the host record: a step
#: number and a batch's simulation ids each)
LIMIT = 1024
#: simulations named in the error
_NAMED = 16


class NonFiniteLossError(RuntimeError):
    """The training loss (or, after an update, a weight) is NaN or infinite.

    Attributes:
        step: the optimizer step whose loss (or update) was the first non-finite one.
        simulations: the simulations of this rank's batch at that step (empty when it
            was another rank's batch, or samples carry no ``simulation_id``).
    """

    def __init__(self, message: str, step: int, simulations: Sequence[int]) -> None:
        super().__init__(message)
        self.step, self.simulations = step, list(simulations)


class LossGuard:
    """Records micro-batch losses on the device and checks them (module docstring).

    Args:
        device: the training device.
        distributed: a process group is up (checks are then collectives).
        limit: micro-batches recorded at most between two checks.
    """

    def __init__(self, device: torch.device, distributed: bool, limit: int = LIMIT) -> None:
        self.distributed, self.limit = distributed, limit
        #: the recorded losses (0-d device tensors, by reference: stacked when checked)
        self._losses: list[torch.Tensor] = []
        self._index = torch.arange(limit, dtype=torch.int64, device=device)
        self._none = torch.full((), limit, dtype=torch.int64, device=device)
        self._steps: list[int] = []  # the step of each recorded loss
        #: the simulations of its batch (a block's ``simulation_id`` column, by reference)
        self._sims: list[np.ndarray | None] = []
        self._with_ids = True  # samples carry simulation ids (until one batch has none)
        # what the last `window_code` covered: (losses recorded then, `_checks` then)
        self._coded: tuple[int, int] | None = None
        self._checks = 0  # `check`s so far: one forgets every loss, coded or not

    def record(
        self, loss: torch.Tensor, step: int, samples: Any, ids: np.ndarray | None = None
    ) -> None:
        """Keep `loss` (a 0-d tensor, on the device) of a micro-batch of optimizer step
        `step`, whose raw samples were `samples` (`ids`: their simulation ids, when the
        caller has them already: the dataset's, when per-sample losses are tracked; not
        computed again). No device operation and no host sync:
        the tensor is kept by reference until it is checked, so it must not be changed
        in place meanwhile (the trainer's losses are fresh tensors, which hooks read
        only: `Hook.on_after_backward`). Past `limit` unchecked losses, a `check`
        (collective: every rank records in lockstep)."""
        if len(self._steps) == self.limit:
            self.check()
        loss = loss.detach()
        self._losses.append(loss if loss.dim() == 0 else loss.reshape(()))
        self._steps.append(step)
        if ids is None and self._with_ids:
            try:  # (a host block's column comes back by reference: a block never changes)
                ids = simulation_ids(samples)
            except (ValueError, TypeError):  # not the stream's samples: no ids to name
                self._with_ids = False
        self._sims.append(ids)

    def window_code(self) -> torch.Tensor | None:
        """For the stop flag's all-reduce (MAX) under several ranks: ``limit - i`` for
        the first non-finite loss recorded so far, at index i, else 0 (a device scalar:
        no sync); None in a single process (nothing rides on a collective then: see
        `check`). The losses recorded from now on are not covered: `settle` forgets
        only these."""
        if not self.distributed:
            return None
        self._coded = (len(self._steps), self._checks)
        return self.limit - self._first_bad()

    def settle(self, code: int | None) -> None:
        """Act on the last `window_code` reduced over ranks (it may be read one window
        later; losses recorded since are kept): raise if it names a non-finite loss,
        else forget the losses it covered. None (a single process): nothing. A `check`
        in between checked (and forgot) them already: nothing then either."""
        coded, self._coded = self._coded, None
        if code is None or coded is None:
            return
        count, checks = coded
        if checks != self._checks:  # a check read them since (and found them finite)
            return
        if code:
            self._raise(self.limit - code, None)
        self._forget(count)

    def check(self, weights: Iterable[torch.Tensor] = ()) -> None:
        """Raise `NonFiniteLossError` if a loss recorded since the last check, or one
        of `weights`, is not finite; forget the losses checked. Collective under
        several ranks (one all-reduce of two integers); one device-to-host copy."""
        self.check_agreeing((), weights)

    def check_agreeing(
        self, asks: Sequence[int], weights: Iterable[torch.Tensor] = ()
    ) -> tuple[int, ...]:
        """`check`, with `asks` (this rank's requests, `TrainerControl.take_asks`) in
        the same all-reduce: returns their maximum over ranks (this rank's own in one
        process), at no extra collective or read. Every rank gives as many `asks`."""
        local = self._first_bad()
        tensors = [w.detach() for w in weights]
        if tensors:
            finite = torch.stack([torch.isfinite(w).all() for w in tensors]).all()
            bad_weights = (~finite).to(torch.int64)
        else:
            bad_weights = torch.zeros_like(local)
        flags = torch.stack([self.limit - local, bad_weights])
        if asks:
            flags = torch.cat([flags, torch.tensor(list(asks), dtype=flags.dtype).to(flags)])
        if self.distributed:
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        code, weights_bad, *agreed = flags.tolist()
        if code:
            self._raise(self.limit - int(code), int(local))
        self._forget()
        self._checks += 1
        if weights_bad:
            raise NonFiniteLossError(
                "a weight of the model is NaN or infinite after an update, although every "
                "training loss was finite (a non-finite gradient): training stopped on "
                "every rank, and this state is not saved (the last checkpoint on disk "
                "holds finite weights). Lower the learning rate, clip gradients, or look "
                "for a loss whose gradient divides by zero",
                -1,
                [],
            )
        return tuple(int(a) for a in agreed)

    # -- internals ---------------------------------------------------------------------

    def _first_bad(self) -> torch.Tensor:
        """The index of the first non-finite loss recorded, else `limit` (a device
        scalar: no sync)."""
        n = len(self._steps)
        if not n:
            return self._none
        bad = ~torch.isfinite(torch.stack(self._losses))  # (dtypes promoted to a common one)
        return torch.where(bad, self._index[:n], self._none).min()

    def _forget(self, count: int | None = None) -> None:
        """Forget the first `count` losses recorded (None: all)."""
        n = len(self._steps)
        count = n if count is None else min(count, n)
        del self._losses[:count]
        del self._steps[:count]
        del self._sims[:count]

    def _raise(self, index: int, local: int | None) -> None:
        """Raise for the first non-finite loss, at `index` on some rank; `local` is
        this rank's own first index (None: unknown, read now)."""
        if local is None:
            local = int(self._first_bad())  # (the error path: a sync is fine)
        step = self._steps[index]
        ids = self._sims[index] if local == index else None
        sims = sorted({int(s) for s in np.asarray(ids).reshape(-1)}) if ids is not None else []
        if sims:
            more = ", ..." if len(sims) > _NAMED else ""
            where = f" (this rank's batch holds samples of simulations {sims[:_NAMED]}{more})"
        elif local != index:
            where = " (on another rank's batch)"
        else:
            where = ""
        raise NonFiniteLossError(
            f"the training loss is NaN or infinite at step {step}{where}: training "
            "stopped on every rank, and no checkpoint is written from this step on (the "
            "last one on disk holds finite weights). Look for samples of huge finite "
            "values (a solver blowing up: its last steps before NaN or Inf, which pass the "
            "receiver; a square above 3.4e38 is Inf in float32), samples holding NaN or "
            "Inf (the receiver refuses them unless nonfinite='accept'), a learning rate "
            "too high, or a loss that divides by zero",
            step,
            sims,
        )
