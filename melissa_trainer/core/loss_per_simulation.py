"""Per-simulation training loss: how badly the surrogate does on each simulation's data.

The trainer computes the per-sample losses of every batch it trains on anyway (their mean
is the step's loss: no extra forward pass) when a hook asks for them (SAMPLE_LOSSES); the
`SimulationLossTracker` hook (`melissa_trainer.hooks.loss_tracker`) asks, and keeps
them in a `SimulationLosses`, with the samples' simulation ids, *on the training device*
until the next reduction, then, every `simulation_loss_steps` steps (on every rank at the
same step: a collective), moves them
to the host once, sums them per simulation, gathers every rank's sums and folds them into
one statistic per simulation, identical on every rank:

* ``draws``: how many of its samples were trained on (a sample drawn twice counts twice);
* ``mean``: the mean training loss of those samples, each taken when it was drawn;
* ``relative``: the same, each sample's loss ``l`` taken relative to the *reference*
  ``r`` of its reduction period, as ``1 + (l - r) / |r|`` (``l / r`` for positive
  losses). The reference is the mean loss of every finite sample drawn, on every rank,
  in that period and the `REFERENCE_PERIODS - 1` before it. The plain mean falls as the
  model trains, so a simulation trained on early looks worse than one trained on late;
  the relative loss does not drift: above 1, the surrogate does worse there than on the
  data trained on at about the same time. Several periods, not one: when a period holds
  one simulation (one runs at a time, or it spans the period), it is still compared with
  the ones before. A loss below zero (a log-likelihood) keeps its order.

A non-finite sample loss makes its simulation's `mean` and `relative` non-finite for good
(a diverged simulation is not hidden, and `Launcher.observe` skips it); it is left out of
the reference. A reference of 0 (every loss 0) makes every relative loss 1.

Cost per step: one tensor (or the step's deferred outputs and targets) and one small id
array appended to a list (no device operation; `melissa_trainer.core.period_losses`).
Per reduction: one device-to-host copy, three small all-gathers (lengths, ids and
counts, sums; tensors, never pickles) and the period's samples counted per id
(`loss_sums.sum_per_id`: a table over the ids' range, no sort, where it is narrow; in a
single process, straight into the statistics' rows when they hold a range of ids and
the period's lie in it, `loss_sums.sum_per_row`: the same bits in fewer numpy calls).

A reduction's period boundaries belong to the statistic (the reference is made of
periods), so the unreduced samples and the recent periods are part of a checkpoint (`state_dict`): a
resumed run reduces at the same steps, over the same samples, as one never stopped
(`melissa_trainer.core.loss_per_simulation_state`, the checkpoint half of the class).

Memory: the unreduced samples (ids and losses of `simulation_loss_steps` steps of
batches; deferred outputs and targets up to `period_losses.DEFERRED_BYTES`) and five
numbers per simulation ever trained on.

Not thread-safe: the training thread only (hooks read it there).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import torch

from melissa_trainer.core.loss_per_simulation_state import SimulationLossesState

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.core.loss_steps import (
    DEFAULT_SIMULATION_LOSS_STEPS as DEFAULT_SIMULATION_LOSS_STEPS,
)
from melissa_trainer.core.loss_steps import resolve_loss_steps as resolve_loss_steps
from melissa_trainer.core.loss_sums import gather_sums, sum_per_id, sum_per_row
from melissa_trainer.core.period_losses import PeriodLosses
from melissa_trainer.core.sample_losses import DeferredSampleLosses

__all__ = ["REFERENCE_PERIODS", "SimulationLoss", "SimulationLosses"]

#: reduction periods whose mean loss is the reference of the relative loss
REFERENCE_PERIODS = 4
#: the file of a checkpoint's rank_R/ that holds `SimulationLosses.state_dict()`
STATE_FILE = "simulation_losses.safetensors"


@dataclass(frozen=True)
class SimulationLoss:
    """One simulation's statistic (see the module docstring).

    Attributes:
        simulation_id: the simulation.
        draws: samples of it trained on, over every rank (redraws included).
        mean: their mean training loss, each when it was drawn.
        relative: their mean loss relative to the reference of their reduction periods.
        step: the `global_step` of the last reduction that had samples of it.
    """

    simulation_id: int
    draws: int
    mean: float
    relative: float
    step: int


class SimulationLosses(SimulationLossesState, Mapping[int, SimulationLoss]):
    """The per-simulation statistics of one trainer (module docstring).

    A read-only mapping from simulation id to its `SimulationLoss`, holding the
    simulations whose samples were reduced (``losses[7]``, ``losses.get(7)``,
    ``losses.items()``; iteration gives the ids in increasing order). Read it between
    steps, from the training thread (hooks): a reduction updates it in place.

    Args:
        device: where the step's losses live until a reduction (the training device).
        distributed: reduce over the process group (every rank must then call `reduce`
            at the same steps).
    """

    def __init__(self, device: torch.device, distributed: bool) -> None:
        self.device = device
        self.distributed = distributed
        self._period = PeriodLosses(device)  # the unreduced samples
        # the statistics, one row per simulation id, ids increasing: draws, loss sum,
        # relative sum (float64), step of the last reduction with samples of it. Columns,
        # not a dict of rows: a reduction updates its simulations' rows in a few
        # vector operations (issue 46's seventh round: one Python iteration each before)
        self._ids = np.zeros(0, np.int64)
        self._draws = np.zeros(0, np.int64)
        self._loss_sum = np.zeros(0, np.float64)
        self._relative_sum = np.zeros(0, np.float64)
        self._step = np.zeros(0, np.int64)
        # (sum, count) of the finite losses of the last REFERENCE_PERIODS periods
        self._recent: deque[tuple[float, int]] = deque(maxlen=REFERENCE_PERIODS)
        self.reductions = 0  # how many reductions ran (for tests and telemetry)

    # -- the step -------------------------------------------------------------------------

    def place(self, device: torch.device, distributed: bool) -> None:
        """Keep the losses on `device` from now on (the unreduced ones held are moved
        there: restored from a checkpoint, they are on the device this was created
        with), and reduce over the process group if `distributed`."""
        self.device, self.distributed = device, distributed
        self._period.place(device)

    def record(
        self, simulation_ids: np.ndarray | None, losses: torch.Tensor | DeferredSampleLosses
    ) -> None:
        """Keep one micro-batch's per-sample `losses` (shape ``[n]``, or deferred: computed
        later, `melissa_trainer.core.period_losses`) of the samples of `simulation_ids`
        (``[n]``), until the next `reduce`. No host sync.

        Raises:
            ValueError: no ids (the samples carry no ``simulation_id``: None), or the
                shapes differ (a `process_batch` or `compute_sample_losses` that does
                not keep one row per sample, in order).
        """
        if simulation_ids is None:
            raise ValueError(
                "per-simulation losses need a 'simulation_id' field in every sample, which "
                "the stream's receiver adds and this source's samples lack: add it, or set "
                "simulation_loss_steps=0"
            )
        n = len(simulation_ids)
        if isinstance(losses, DeferredSampleLosses):
            if losses.elementwise.shape[0] != n:
                _refuse((losses.rows,), n)
            self._period.defer(np.asarray(simulation_ids, dtype=np.int64), losses)
            return
        if losses.dim() != 1 or losses.shape[0] != n:
            _refuse(tuple(losses.shape), n)
        if losses.requires_grad:  # (the trainer's are detached already)
            losses = losses.detach()
        self._period.record(np.asarray(simulation_ids, dtype=np.int64), losses)

    @property
    def unreduced(self) -> int:
        """Samples recorded since the last reduction, on this rank."""
        return len(self._period)

    def reduce(self, step: int) -> dict[int, SimulationLoss]:
        """Fold every rank's recorded samples into the statistics; returns those of the
        simulations that had samples in this period (the same on every rank).

        Collective when `distributed`: every rank calls it at the same `step`. Blocks
        for one device-to-host copy of this period's losses.
        """
        # this rank's period (forgotten), summed per simulation, ids increasing
        ids, rows, sums, counts = self._fold(*self._period.take())
        self.reductions += 1
        number = int(counts.sum())
        if number == 0:
            return {}
        total = float(sums.sum())
        if not math.isfinite(total):  # (a finite total: every sum is finite)
            finite = np.isfinite(sums)
            total, number = float(sums[finite].sum()), int(counts[finite].sum())
        self._recent.append((total, number))
        kept = sum(n for _, n in self._recent)
        reference = sum(total for total, _ in self._recent) / kept if kept else math.nan
        # per sample 1 + (l - r) / |r|, summed per simulation; r = 0: every loss is 0
        if reference != 0:
            relative = counts + (sums - counts * reference) / abs(reference)
        else:
            relative = counts.astype(np.float64)
        # each row's sums: one float64 addition each, as a Python float's (the same bits)
        if rows is _ALL:  # (every row: the columns in place, one numpy call each)
            self._draws += counts
            self._loss_sum += sums
            self._relative_sum += relative
            self._step.fill(step)
            draws, loss_sums, relative_sums = self._draws, self._loss_sum, self._relative_sum
        else:
            self._draws[rows] += counts
            self._loss_sum[rows] += sums
            self._relative_sum[rows] += relative
            self._step[rows] = step
            draws = self._draws[rows]
            loss_sums, relative_sums = self._loss_sum[rows], self._relative_sum[rows]
        means = loss_sums / draws  # (float64 / int64: IEEE's, as `_loss`'s)
        relatives = relative_sums / draws
        return {
            sid: _made(sid, n, mean, rel, step)
            for sid, n, mean, rel in zip(
                ids.tolist(), draws.tolist(), means.tolist(), relatives.tolist(), strict=True
            )
        }

    def _fold(
        self, ids: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, Any, np.ndarray, np.ndarray]:
        """A period's samples (`ids`, their `values`) summed per simulation over every
        rank: the distinct ids (increasing), their rows in the statistics (rows added
        for new ids; an index array or a slice), their sums and their numbers."""
        if not self.distributed and len(self._ids):
            # (the statistics hold a range of ids and the period's lie in it: the usual
            # case, in fewer numpy calls than the general path; the same bits, tested)
            low, count = int(self._ids[0]), len(self._ids)
            if int(self._ids[-1]) - low + 1 == count:
                folded = sum_per_row(ids, values, low, count)
                if folded is not None:
                    rows, sums, counts = folded
                    if rows is None:
                        return self._ids, _ALL, sums, counts
                    return rows + low, rows, sums, counts
        ids, sums, counts = sum_per_id(ids, values)
        if self.distributed:
            ids, sums, counts = gather_sums(ids, sums, counts, self.device)
            ids, sums, counts = sum_per_id(ids, sums, counts)  # an id on several ranks: one
        return ids, self._rows_of(ids), sums, counts

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        """The rows of the statistics of `ids` (distinct, increasing), rows of zeros
        added for those without one (the columns stay in increasing id order)."""
        rows = np.searchsorted(self._ids, ids)
        known = rows < len(self._ids)
        known[known] = self._ids[rows[known]] == ids[known]
        if known.all():
            return rows
        merged = np.union1d(self._ids, ids)
        old = np.searchsorted(merged, self._ids)
        for name in ("_draws", "_loss_sum", "_relative_sum", "_step"):
            column = getattr(self, name)
            grown = np.zeros(len(merged), column.dtype)
            grown[old] = column
            setattr(self, name, grown)
        self._ids = merged
        return np.searchsorted(merged, ids)

    # -- reading --------------------------------------------------------------------------

    def __getitem__(self, simulation_id: int) -> SimulationLoss:
        """The statistic of `simulation_id`; KeyError if none of its samples was reduced
        (`get` gives None instead)."""
        sid = int(simulation_id)
        row = int(np.searchsorted(self._ids, sid))
        if row == len(self._ids) or int(self._ids[row]) != sid:
            raise KeyError(simulation_id)
        return _loss(sid, int(self._draws[row]), float(self._loss_sum[row]),
                     float(self._relative_sum[row]), int(self._step[row]))  # fmt: skip

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[int]:
        """The ids of the simulations with a statistic, in increasing order."""
        return iter(self._ids.tolist())


def _refuse(shape: tuple[int, ...], n: int) -> NoReturn:
    raise ValueError(
        f"compute_sample_losses returned a tensor of shape {shape} for a batch of {n} "
        f"samples: it must return one loss per sample, in the batch's order (shape [{n}]), "
        f"and so must process_batch or collate_fn keep one row per sample, in order"
    )


def _loss(
    simulation_id: int, draws: int, loss_sum: float, relative_sum: float, step: int
) -> SimulationLoss:
    return SimulationLoss(simulation_id, draws, loss_sum / draws, relative_sum / draws, step)


_new = object.__new__
#: every row of the statistics (`reduce`'s usual case)
_ALL = slice(None)


def _made(simulation_id: int, draws: int, mean: float, relative: float, step: int) -> Any:
    """``SimulationLoss(simulation_id, draws, mean, relative, step)``, its fields set in
    its ``__dict__`` one by one, in ``__init__``'s order: the same frozen instance (equal,
    hashed and printed alike; a test compares them) for less than half the CPU of the
    frozen dataclass's ``__init__`` (issue 46's seventh and ninth rounds: a reduction
    makes one per simulation of its period, on the training thread)."""
    made = _new(SimulationLoss)
    fields = made.__dict__
    fields["simulation_id"] = simulation_id
    fields["draws"] = draws
    fields["mean"] = mean
    fields["relative"] = relative
    fields["step"] = step
    return made
