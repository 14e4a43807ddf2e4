"""`TrainerLosses`: the loss a training step minimises, a base class of `OnlineTrainer`.

`compute_loss` and `compute_sample_losses` are the override points (a subclass of
`OnlineTrainer` replaces them); `_choose_loss` picks which one the step calls, at
construction and again at each `train()` (a hook listening to SAMPLE_LOSSES may have been
added since). `simulation_losses` and `tracked_losses` read the per-simulation losses that
the `SimulationLossTracker` hook sums from them.

Thread-safety: the training thread only, as the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from accelerate import Accelerator

from melissa_trainer.core.accelerated import TrainStep, unit_loss_gradient
from melissa_trainer.core.dataset import StreamDataset
from melissa_trainer.core.loss_per_simulation import SimulationLosses
from melissa_trainer.core.sample_losses import (
    DeferredSampleLosses,
    check_loss_overrides,
    deferred_sample_losses,
    fused_mse_loss,
    per_sample_losses,
    sample_losses_of,
    step_sample_losses,
)
from melissa_trainer.hooks import Event, Hook, HookList, SimulationLossTracker
from melissa_trainer.trainer.loss_inputs import check_outputs, inputs_targets

__all__ = ["LossFn", "TrainerLosses"]

LossFn = Callable[[Any, Any], torch.Tensor]


class TrainerLosses:
    """The losses of `OnlineTrainer` (which sets the attributes declared here)."""

    accelerator: Accelerator
    dataset: StreamDataset
    hooks: HookList
    loss_fn: LossFn
    _step: TrainStep
    #: the last micro-batch's per-sample losses, for SAMPLE_LOSSES (`_choose_loss`);
    #: deferred when only the library's trackers listen (`_defer_sample_losses`)
    _sample_losses: torch.Tensor | DeferredSampleLosses | None = None
    _defer_sample_losses: bool = False
    #: neither loss overridden: the default loss's paths (`_sample_loss_mean`)
    _default_losses: bool = True
    #: the step's backward seeds the loss with exactly 1 (`fused_mse_loss`'s condition)
    _fuse_losses: bool = False
    #: where SAMPLE_LOSSES goes when only the library's trackers listen: each one's
    #: `SimulationLosses.record`, called by the loop instead of the event (None: the event)
    _sample_loss_sinks: list[Callable[[Any, Any], None]] | None = None
    #: the default loss's outputs and targets not compared yet in this `train()`
    #: (`loss_inputs.check_outputs`: once, on the first micro-batch)
    _check_output_shape: bool = True

    def compute_loss(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """The loss of one batch; by default `loss_fn(model(inputs), targets)`, or the
        mean of `compute_sample_losses` where a subclass overrides that alone (one loss,
        whether per-simulation losses are tracked or not, and in validation)."""
        if type(self).compute_sample_losses is not TrainerLosses.compute_sample_losses:
            return self.compute_sample_losses(model, batch).mean()
        inputs, targets = inputs_targets(batch, "compute_loss", self.dataset)
        outputs = model(inputs)
        if self._check_output_shape:  # (once: `loss_inputs`)
            check_outputs(self.loss_fn, outputs, targets)
            self._check_output_shape = False
        return self.loss_fn(outputs, targets)

    def compute_sample_losses(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """The loss of each sample of one batch, shape ``[batch]``, in the batch's order.
        By default ``loss_fn(model(inputs), targets, reduction="none")`` averaged over all
        but the first dimension (validation's tails use it). Overridden, it is also what
        the per-simulation losses are made of, and its mean is the step's loss, when a
        hook asks for them (SAMPLE_LOSSES; instead of `compute_loss`: one forward pass).
        A `process_batch` or `collate_fn` must then keep one row per sample, in order:
        the losses are matched to the samples' simulations by position."""
        inputs, targets = inputs_targets(batch, "compute_sample_losses", self.dataset)
        return per_sample_losses(self.loss_fn, model(inputs), targets)

    def _choose_loss(self) -> None:
        """The step's loss: the mean of `compute_sample_losses`, kept for SAMPLE_LOSSES,
        when some hook listens to that event (it then also needs the batches'
        simulation ids), else `compute_loss`. Raises TypeError as
        `check_loss_overrides`.

        When every listener is a `SimulationLossTracker` as the library wrote it, the
        losses go deferred (computed with the period's others, the same values) straight
        to each one's `SimulationLosses.record`, which is all its `on_sample_losses` does
        (the loop calls them instead of firing the event: issue 46, the cost on the
        step). Chosen at each `train()`, as the listeners."""
        wanted = self.hooks.listens(Event.SAMPLE_LOSSES)
        if wanted:
            check_loss_overrides(type(self), TrainerLosses)
        listeners = [
            h for h in self.hooks.hooks if type(h).on_sample_losses is not Hook.on_sample_losses
        ]
        trackers = [
            h
            for h in listeners
            if isinstance(h, SimulationLossTracker)
            and type(h).on_sample_losses is SimulationLossTracker.on_sample_losses
        ]
        trackers_only = wanted and len(trackers) == len(listeners)
        self._defer_sample_losses = trackers_only
        self._sample_loss_sinks = [t.losses.record for t in trackers] if trackers_only else None
        cls = type(self)
        self._default_losses = (
            cls.compute_sample_losses is TrainerLosses.compute_sample_losses
            and cls.compute_loss is TrainerLosses.compute_loss
        )
        self._fuse_losses = unit_loss_gradient(self.accelerator)
        self.dataset.track_simulation_ids = wanted
        self._check_output_shape = True
        self._step.compute_loss = self._sample_loss_mean if wanted else self.compute_loss

    def _sample_loss_mean(self, model: torch.nn.Module, batch: Any) -> torch.Tensor:
        """The step's loss when a hook listens to SAMPLE_LOSSES, the per-sample losses
        kept (detached, on the device) for the event. Where neither loss is overridden:
        the step's loss is `loss_fn(outputs, targets)`, as without the event (the same
        training, bit for bit), and the per-sample losses come from the same outputs
        without autograd (no backward node: issue 46, their cost on the step), deferred
        where only trackers listen (`deferred_sample_losses`); for the default loss on
        the CPU with a backward seeded with 1, both from one elementwise operator
        (`fused_mse_loss`: the same loss and gradient bits). Else the mean of
        `compute_sample_losses`."""
        if self._default_losses:
            inputs, targets = inputs_targets(batch, "compute_sample_losses", self.dataset)
            outputs = model(inputs)
            if self._check_output_shape:
                check_outputs(self.loss_fn, outputs, targets)
                self._check_output_shape = False
            if self._fuse_losses:
                fused = fused_mse_loss(self.loss_fn, outputs, targets)
                if fused is not None:
                    self._sample_losses = sample_losses_of(fused[1], self._defer_sample_losses)
                    return fused[0]
            self._sample_losses = (
                deferred_sample_losses(self.loss_fn, outputs, targets)
                if self._defer_sample_losses
                else step_sample_losses(self.loss_fn, outputs, targets)
            )
            return self.loss_fn(outputs, targets)
        losses = self.compute_sample_losses(model, batch)
        self._sample_losses = losses.detach()
        return losses.mean()

    @property
    def simulation_losses(self) -> SimulationLosses:
        """Each simulation's training loss, the same on every rank: the statistics of
        the `SimulationLossTracker` among the hooks (installed by
        ``simulation_loss_steps`` or an adaptive study), empty when there is none. A
        read-only mapping simulation id -> `SimulationLoss`; read it between steps."""
        tracked = self.tracked_losses
        if tracked is None:
            return SimulationLosses(self.accelerator.device, distributed=False)
        return tracked

    @property
    def tracked_losses(self) -> SimulationLosses | None:
        """The `SimulationLossTracker` hook's statistics, which it updates (and a
        checkpoint saves and loads in place); None when the run tracks none."""
        tracker = self.hooks.get(SimulationLossTracker)
        return None if tracker is None else tracker.losses
