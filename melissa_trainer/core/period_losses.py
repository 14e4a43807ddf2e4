"""The samples of the current reduction period, not reduced yet: each micro-batch's
simulation ids and per-sample losses, as `SimulationLosses` keeps them between two
reductions (`melissa_trainer.core.loss_per_simulation`).

A micro-batch's losses come computed (a tensor, on the training device) or deferred
(`DeferredSampleLosses`: its elementwise losses, on the CPU, not averaged per sample yet;
issue 46, the cost of the per-sample losses on every step). Deferred ones are averaged
together (`sample_losses.losses_of`, the same values bit for bit) when the period is
taken, when a computed batch comes after them (the order is kept), when the state is
read, and as soon as they hold more than `DEFERRED_BYTES`.

Memory: the ids and losses of one period (`simulation_loss_steps` steps of batches), and
at most `DEFERRED_BYTES` of deferred elementwise losses (the size of the steps' outputs):
4 MiB, 128 steps of the issue-46 benchmark's 32 x 256 float32 outputs (32 KiB a step); a
step of outputs larger than that is averaged at the next record.

Not thread-safe: the training thread only.
"""

from __future__ import annotations

import numpy as np
import torch

from melissa_trainer.core.sample_losses import DeferredSampleLosses, losses_of

__all__ = ["DEFERRED_BYTES", "PeriodLosses"]

#: the most bytes of deferred outputs and targets held before they are computed
DEFERRED_BYTES = 4 * 2**20
#: the dtypes `PeriodLosses.take` hands over as they are (numpy has them)
_HOST_DTYPES = (torch.float32, torch.float64)


class PeriodLosses:
    """One rank's unreduced samples (module docstring), in the order recorded.

    Args:
        device: where computed losses are kept (the training device).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._ids: list[np.ndarray] = []  # per micro-batch, int64, on the host
        self._losses: list[torch.Tensor] = []  # computed, detached, on the device
        self._deferred: list[DeferredSampleLosses] = []  # after every computed one
        self._deferred_bytes = 0

    def __len__(self) -> int:
        """Samples recorded since the period began."""
        return sum(len(ids) for ids in self._ids)

    def place(self, device: torch.device) -> None:
        """Keep the losses on `device` from now on (those held are moved there)."""
        self._settle()
        self.device = device
        self._losses = [x.to(device) for x in self._losses]

    def record(self, ids: np.ndarray, losses: torch.Tensor) -> None:
        """Keep one micro-batch's simulation `ids` (int64, ``[n]``) and its per-sample
        `losses` (``[n]``, detached). No host sync (the deferred ones before it are
        averaged first: the losses stay in the ids' order)."""
        if self._deferred:
            self._settle()
        self._ids.append(ids)
        self._losses.append(losses)

    def defer(self, ids: np.ndarray, losses: DeferredSampleLosses) -> None:
        """`record`, its losses deferred: no operation (unless more than
        `DEFERRED_BYTES` are held then: they are averaged)."""
        self._ids.append(ids)
        self._deferred.append(losses)
        self._deferred_bytes += losses.elementwise.nbytes
        if self._deferred_bytes > DEFERRED_BYTES:
            self._settle()

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """The period's ids (int64) and losses (float32 or float64, on the host: one
        device-to-host copy; other dtypes as float64, exactly), in the order recorded;
        the period is forgotten."""
        if not self._ids:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        self._settle()
        ids = np.concatenate(self._ids) if len(self._ids) > 1 else self._ids[0]
        # one concatenation (exact: cat promotes to a dtype holding every part's values),
        # then one copy to the host, not one per micro-batch; no float64 conversion of
        # float32 (what it adds is done as exactly by the sums' `numpy.bincount`, in
        # float64: issue 46's ninth round, a torch call less on the training thread)
        losses = self._losses[0] if len(self._losses) == 1 else torch.cat(self._losses)
        if losses.dtype not in _HOST_DTYPES:
            losses = losses.to(torch.float64)
        values = (losses if losses.is_cpu else losses.cpu()).numpy()
        self._ids.clear()
        self._losses.clear()
        return ids, values

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The period's ids and losses as `take` gives them, kept (a checkpoint's)."""
        self._settle()
        losses = (
            torch.cat([x.to(torch.float64) for x in self._losses]).cpu().numpy()
            if self._losses
            else np.zeros(0, np.float64)
        )
        ids = np.concatenate(self._ids) if self._ids else np.zeros(0, np.int64)
        return ids, losses

    def load(self, ids: np.ndarray, losses: np.ndarray) -> None:
        """Replace the period with `ids` and `losses` (as `arrays` gives them)."""
        self._deferred, self._deferred_bytes = [], 0
        self._ids = [ids] if len(ids) else []
        self._losses = [torch.from_numpy(losses.copy()).to(self.device)] if len(losses) else []

    def _settle(self) -> None:
        """Average the deferred losses per sample (in one call: `losses_of`)."""
        if self._deferred:
            losses = losses_of(self._deferred)  # (on the CPU)
            self._losses.append(losses if self.device.type == "cpu" else losses.to(self.device))
            self._deferred, self._deferred_bytes = [], 0
