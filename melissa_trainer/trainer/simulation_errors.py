"""The tails of the validation error: each held-out simulation's mean loss, and their
99th percentile and maximum beside the mean (issue 46).

A surrogate used for design or safety fails on its worst simulations, which the mean
over every validation sample hides. When every sample of the `eval_dataset` carries a
``simulation_id`` (the examples' held-out simulations do), `OnlineTrainer.evaluate`
computes each sample's loss (`OnlineTrainer.compute_sample_losses`: the same forward
pass, the same mean), sums them per simulation here, reduces the sums over ranks and
adds to the validation metrics:

* ``eval_loss_p99``: the 99th percentile of the per-simulation mean losses (linear
  interpolation, numpy's default; with fewer than 100 simulations it lies between the
  two largest);
* ``eval_loss_max``: the largest per-simulation mean loss;
* ``eval_simulations``: how many simulations they are over;
* ``eval_worst_simulation``: the id of the simulation whose mean loss is
  ``eval_loss_max`` (the smallest id on a tie): which one, with its parameters and every
  other's loss in ``trainer.held_out_losses`` and ``{output_dir}/held_out_losses.csv``
  (`melissa_trainer.trainer.held_out`).

``eval_loss`` stays the mean over samples. Without simulation ids, or when the trainer
cannot compute per-sample losses (its class overrides `compute_loss` alone, or its
`loss_fn` takes no ``reduction``; a warning says which), the metrics are ``eval_loss``
alone, as before.

Every rank builds the same index (simulation id -> row) from the whole `eval_dataset`,
which every rank holds (each evaluates its share of it), so the sums reduce with one
all-reduce of a tensor, never a pickle. Not thread-safe: the training thread.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

from melissa_trainer.config.reading import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["SimulationErrors", "per_sample_losses_available"]

#: the percentile reported beside the maximum
PERCENTILE = 99.0


def per_sample_losses_available(trainer: OnlineTrainer) -> bool:
    """Whether `trainer` computes one loss per sample whose mean is its validation
    loss: its class overrides `compute_sample_losses`, or else neither `compute_loss`
    nor a `loss_fn` without a ``reduction`` argument stands in the way (a warning
    names which one does)."""
    cls = type(trainer)
    if _overridden(cls, "compute_sample_losses"):
        return True
    if _overridden(cls, "compute_loss"):
        reason = f"{cls.__name__} overrides compute_loss but not compute_sample_losses"
    else:
        try:
            takes = "reduction" in inspect.signature(trainer.loss_fn).parameters
        except (TypeError, ValueError):  # a builtin or callable without a signature
            takes = False
        if takes:
            return True
        reason = "its loss_fn takes no reduction argument"
    warnings.warn(
        f"validation reports no per-simulation tails (eval_loss_p99, eval_loss_max): "
        f"{reason}; override compute_sample_losses to have them",
        stacklevel=3,
    )
    return False


def _overridden(cls: type, name: str) -> bool:
    """Whether `cls` replaces the method `name` of the first class (in its MRO, from
    the root) that defined it: the trainer's own, without importing the trainer."""
    first = next(vars(klass)[name] for klass in reversed(cls.__mro__) if name in vars(klass))
    return getattr(cls, name) is not first


class SimulationErrors:
    """Per-simulation sums of validation losses over one `eval_dataset`.

    Build it with `of` (None when the samples carry no simulation id); `add` each
    batch's per-sample losses with the samples' positions in the dataset; `metrics`
    reduces over ranks (a collective when `distributed`) and returns the tails.
    """

    def __init__(self, ids: Sequence[int], device: torch.device) -> None:
        unique, first, rows = np.unique(
            np.asarray(ids, dtype=np.int64), return_index=True, return_inverse=True
        )
        self.simulations = len(unique)
        #: the simulations' ids, ascending; after `metrics`, `means` their mean losses
        self.ids: tuple[int, ...] = tuple(int(i) for i in unique)
        #: the position in the dataset of each one's first sample (`held_out` reads its
        #: parameters there, without a second pass over the dataset)
        self.first: tuple[int, ...] = tuple(int(p) for p in first)
        self.means: tuple[float, ...] = ()
        self._rows = torch.from_numpy(rows.reshape(-1)).to(device)
        self._sums = torch.zeros(2, self.simulations, dtype=torch.float64, device=device)

    @classmethod
    def of(cls, dataset: Sequence[Any], device: torch.device) -> SimulationErrors | None:
        """The accumulator of `dataset`, or None when a sample is not a mapping with a
        ``simulation_id`` (an integer scalar)."""
        ids = []
        for sample in dataset:
            value = sample.get("simulation_id") if hasattr(sample, "get") else None
            if value is None or np.size(value) != 1:
                return None
            ids.append(int(np.asarray(value).reshape(())))
        return cls(ids, device) if ids else None

    def add(self, positions: Sequence[int], losses: torch.Tensor) -> None:
        """Add the per-sample `losses` of the samples at `positions` (no host sync)."""
        if losses.shape != (len(positions),):
            raise ValueError(
                f"compute_sample_losses returned shape {tuple(losses.shape)} for a batch of "
                f"{len(positions)} validation samples: one loss per sample is needed"
            )
        rows = self._rows[torch.as_tensor(list(positions), device=self._rows.device)]
        self._sums[0].index_add_(0, rows, losses.detach().to(torch.float64))
        self._sums[1].index_add_(0, rows, torch.ones_like(rows, dtype=torch.float64))

    def metrics(self, distributed: bool) -> dict[str, float]:
        """``eval_loss_p99``, ``eval_loss_max``, ``eval_simulations`` and
        ``eval_worst_simulation`` over every rank's sums (all-reduced first when
        `distributed`: a collective); sets `means`, the same on every rank."""
        if distributed:
            dist.all_reduce(self._sums)
        totals, counts = self._sums.cpu().numpy()
        # every simulation of the dataset is evaluated by some rank: no count is 0
        means = totals / counts
        self.means = tuple(float(m) for m in means)
        worst = int(np.argmax(means))  # the first (smallest id) of equal maxima
        return {
            "eval_loss_p99": float(np.percentile(means, PERCENTILE)),
            "eval_loss_max": float(means[worst]),
            "eval_simulations": float(len(means)),
            # an id as a float, as every metric is: exact below 2**53
            "eval_worst_simulation": float(self.ids[worst]),
        }


#: the metrics a validation returns: always, and with the per-simulation tails
ALWAYS, TAILS = ("eval_loss",), ("eval_loss_p99", "eval_loss_max", "eval_simulations")


def check_best_metric(
    name: str, eval_dataset: Sequence[Any] | None, hook_keys: Collection[str] = ()
) -> None:
    """Refuse, when the trainer is built, a `metric_for_best_model` that no validation
    of `eval_dataset` returns (with or without its ``eval_`` prefix, as
    `TrainerState.record_metric` reads it): found at the first validation instead, it
    stopped a study whose simulations had run until then. The tails count when every
    sample carries a ``simulation_id``; `hook_keys` are the metrics the hooks declare
    (`HookList.eval_keys`). No check without an `eval_dataset`.

    Raises:
        ConfigError: (a ValueError) naming the metrics there are: a refused start, which
            `refusals_end_the_program` says on one line, exit status 2, as it does a bad
            flag (a plain ValueError was a traceback, exit status 1: htrial46's
            ``--metric_for_best_model accuracy``).
    """
    if eval_dataset is None:
        return
    tails = SimulationErrors.of(eval_dataset, torch.device("cpu")) is not None
    names = ALWAYS + (TAILS if tails else ()) + tuple(sorted(hook_keys))
    if name in names or f"eval_{name}" in names:
        return
    why = (
        ""
        if tails or name.removeprefix("eval_") not in [n.removeprefix("eval_") for n in TAILS]
        else " (the tails need a simulation_id in every validation sample)"
    )
    raise ConfigError(
        f"metric_for_best_model={name!r} is not a metric the validation returns: "
        f"{', '.join(names)}{why}; set it to one of them, or declare it in the "
        "eval_keys of the hook whose eval_figures returns it"
    )
