"""`SimulationLossTracker`: the per-simulation training losses, as a hook.

The trainer knows nothing of simulations: when a hook overrides `on_sample_losses`, it
fires SAMPLE_LOSSES after each micro-batch's backward with the per-sample losses
(detached, on the device) and the samples' ``simulation_id``. This hook keeps them in
a `SimulationLosses` (still on the device: no host sync per step; when trackers alone
listen, the trainer calls their `SimulationLosses.record` itself, all this hook's
`on_sample_losses` does, without the event) and, every `steps`
steps, in its STEP_END (fired on every rank at the same step), reduces them over ranks
(a collective) and fires SIMULATION_LOSSES with the simulations that changed, which
every hook sees (a `Study` with an adaptive sampler feeds them to its launcher). At
TRAIN_END (every rank, after the last checkpoint) it reduces once more, the steps since
its last reduction, so that what is read after `train()`
(`OnlineTrainer.simulation_losses`) holds every sample trained on, not the statistics
of up to `steps` - 1 steps before the end. That last period is shorter than the others
and closes after every checkpoint of the run: a resume continues the periods of the
checkpoint, as a run never stopped would (a checkpoint written by hand after `train()`
holds it: its resume is not that of a run never stopped).

It is installed by `hooks.trainer_hooks` when ``simulation_loss_steps > 0``, or given
by the source (an adaptive `Study`), first among the hooks: SIMULATION_LOSSES then
comes before every other hook's `on_step_end`, and its reduction before the actions
(a checkpoint of that step holds the reduced statistics).

Its state is arrays, not JSON: the checkpoint's ``simulation_losses`` part
(`checkpoint.registry`) writes `losses.state_dict()` to ``rank_R/`` and loads it back,
also on another number of ranks (`SimulationLosses.reshard_state`); `state_dict`
(``hooks.json``) is empty.

Each reduction under several ranks is watched (the trainer's `StopSync.watch`): a rank
held there by a stopped or hung one warns instead of waiting silently. Every `steps` steps
only, beside a reduction that reads the device: the watch's lock costs nothing there.

Not thread-safe: the training thread only (as every hook).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.loss_per_simulation import SimulationLoss, SimulationLosses
from melissa_trainer.core.sample_losses import DeferredSampleLosses
from melissa_trainer.core.state import TrainerState
from melissa_trainer.core.wait_words import STEPS_USUAL
from melissa_trainer.hooks.events import Event
from melissa_trainer.hooks.hook import Hook

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["SimulationLossTracker"]


class SimulationLossTracker(Hook):
    """Tracks each simulation's training loss (`SimulationLosses`), reduced over ranks
    every `steps` steps (module docstring).

    Args:
        steps: the reduction cadence, in optimizer steps (``simulation_loss_steps``).

    Raises:
        ValueError: `steps` < 1.
    """

    def __init__(self, steps: int) -> None:
        if steps < 1:
            raise ValueError(f"SimulationLossTracker(steps={steps!r}): a cadence >= 1")
        self.steps = int(steps)
        #: the statistics (the same on every rank once reduced); on the CPU until
        #: training starts, then on the training device
        self.losses = SimulationLosses(torch.device("cpu"), distributed=False)

    def _place(self, trainer: TrainerView) -> None:
        self.losses.place(trainer.accelerator.device, trainer.stop_sync.distributed)

    def on_load(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        """The restored unreduced losses go to the training device."""
        self._place(trainer)

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self._place(trainer)

    def on_sample_losses(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        losses: torch.Tensor | DeferredSampleLosses,
        simulation_ids: np.ndarray | None,
    ) -> None:
        """Keep the micro-batch's losses until the next reduction (no host sync). The
        trainer passes them deferred (its outputs and targets, computed at the
        reduction: the same values) when every hook listening to SAMPLE_LOSSES is a
        tracker whose `on_sample_losses` is this one (a subclass overriding it gets
        tensors); the trainer then calls `self.losses.record` itself, all this does
        (`TrainerLosses._choose_loss`), without the event.

        Raises:
            ValueError: the samples carry no ``simulation_id``, or the losses are not
                one per sample (`SimulationLosses.record`).
        """
        self.losses.record(simulation_ids, losses)

    def on_step_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """Every `steps` steps: reduce (a collective, on every rank at this step) and
        fire SIMULATION_LOSSES with the simulations that changed, if any."""
        if state.global_step % self.steps:
            return
        updated = self._reduce(trainer, state.global_step)
        if updated:
            trainer.hooks.fire(Event.SIMULATION_LOSSES, trainer, state, control, updated)

    def on_train_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """Reduce the steps since the last reduction (a collective: TRAIN_END is fired
        on every rank) and fire SIMULATION_LOSSES with the simulations that changed:
        the statistics read after `train()` are complete (module docstring). After the
        source stopped: a study's sampler hears of them, its study is over. None when
        this step's STEP_END reduced (on every rank alike: nothing is left)."""
        if state.global_step % self.steps == 0:
            return
        updated = self._reduce(trainer, state.global_step)
        if updated:
            trainer.hooks.fire(Event.SIMULATION_LOSSES, trainer, state, control, updated)

    def _reduce(self, trainer: TrainerView, step: int) -> dict[int, SimulationLoss]:
        """`self.losses.reduce(step)`, watched under several ranks (module docstring)."""
        if not trainer.stop_sync.distributed:
            return self.losses.reduce(step)
        what = f"the other ranks at step {step}'s reduction of the per-simulation losses"
        with trainer.stop_sync.watch.waiting(what, STEPS_USUAL):
            return self.losses.reduce(step)

    def state_dict(self) -> dict[str, Any]:
        """Empty: the statistics are arrays, a checkpoint part of their own (module
        docstring)."""
        return {}
