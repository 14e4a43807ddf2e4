"""The `Hook` interface: the methods a hook may override, one per `Event`, and the
error of a checkpoint's hook state that does not fit, `HookStateMismatch`.

A hook observes the training loop at fixed events and asks for actions through
`TrainerControl`. It reads `TrainerState` and the trainer's public attributes; it never
advances counters or touches the trainer's private state.

Contract: every method of `Hook` is a no-op (its `state_dict` is empty, and its
`load_state_dict` refuses a non-empty state with `HookStateMismatch`); the dispatcher,
`melissa_trainer.hooks.base.HookList`, calls only the methods a subclass overrides. Both
names still import from `melissa_trainer.hooks.base`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState

if TYPE_CHECKING:  # pragma: no cover - import for annotations only
    import numpy as np
    import torch

    from melissa_trainer.core.loss_per_simulation import SimulationLoss
    from melissa_trainer.core.view import TrainerView

__all__ = ["Hook", "HookStateMismatch"]


class HookStateMismatch(ValueError):
    """A checkpoint's hook state does not fit this trainer's hooks: a hook the run that
    wrote it had is missing, or a hook of that name keeps no state here. The message
    names the hook and says what to do; a checkpoint loader adds only the way to start
    afresh (the model's advice, "build it as that run did", does not apply)."""

    #: read by `checkpoint.errors.naming_file`, which cannot import this class
    says_what_to_do = True


class Hook:
    """Base class of hooks: one no-op method per `Event`; override what you need.

    Every method receives the trainer (read its public attributes: `args`, `model`,
    `accelerator`, `buffer`, `is_main_process`…), the `TrainerState` and the
    `TrainerControl`; some events add one payload argument.

    A hook with state worth keeping across a restart overrides `state_dict` and
    `load_state_dict` (JSON-serializable values); the checkpoint stores it under
    `name`, which must be unique among a trainer's hooks.
    """

    @property
    def name(self) -> str:
        return type(self).__name__

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state:
            raise HookStateMismatch(
                f"hook {self.name} has no state but the checkpoint holds {state!r}: give "
                f"{type(self).__name__} the state_dict and load_state_dict of the run that "
                "wrote the checkpoint, or, if it is another hook, another `name`"
            )

    def close(self) -> None:
        """Release resources (files, bars); called once when `train()` returns or raises."""

    #: keys of `log_figures` whose maximum over ranks is logged (the others: the sum)
    log_maxima: frozenset[str] = frozenset()

    def log_figures(self, trainer: TrainerView) -> dict[str, float]:
        """This rank's figures for the training logs (console, TensorBoard,
        ``state.log_history``), added to every log, reduced over ranks: summed, but for
        the keys in `log_maxima` (their maximum). Every rank gives the same keys, which
        must not be the trainer's own. Called on the training thread before each LOG (a
        collective follows). Default: none."""
        return {}

    #: the keys `eval_figures` returns, declared so that `metric_for_best_model` may name
    #: one: the trainer checks that name when it is built (with or without ``eval_``)
    eval_keys: frozenset[str] = frozenset()

    def eval_figures(self, trainer: TrainerView) -> dict[str, float]:
        """Validation metrics of this hook (Hugging Face's ``compute_metrics``), added to
        each validation's metrics: `on_validation_end`'s `metrics`, the console,
        TensorBoard (``eval/<key>``), ``state.log_history``, and `metric_for_best_model`
        if declared in `eval_keys`. A key is prefixed with ``eval_`` unless it has it
        (``rel_l2`` -> ``eval_rel_l2``, as HF does); none may be the trainer's own
        (``eval_loss``...) or another hook's. Called on every rank at each validation,
        after the trainer's pass over `trainer.eval_dataset`, with the model in eval mode
        and gradients off. Not reduced: return the same values on every rank (computed
        from the whole `eval_dataset`, or this rank's share reduced over ranks, a
        collective every rank calls here); values that differ between ranks beyond
        rounding are a ValueError on every rank naming the key, and values equal up to
        rounding are rank 0's everywhere (one gather per validation: `hooks.eval_figures`).
        Default: none."""
        return {}

    def on_load(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        """After a checkpoint at `path` was restored (before TRAIN_START)."""

    def on_source_started(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """Every rank's source has started (a barrier in between: e.g. every receiver
        has published its endpoint), before TRAIN_START; a `Study` starts its
        simulations here (a collective on resume)."""

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """Once, before the first step (after a resume, with the restored state)."""

    def on_end_of_stream(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """The data ran out on every rank; set `control.should_rewind` to replay the buffer."""

    def on_pseudo_epoch_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """A replay of the retained samples begins (`state.pseudo_epoch` already advanced)."""

    def on_pseudo_epoch_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """The live stream, or a replay of the buffer, has been consumed."""

    def on_step_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """Before the first micro-batch of step `state.global_step + 1`."""

    def on_batch_ready(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, batch: Any
    ) -> None:
        """A collated micro-batch is on the device, before the forward pass."""

    def on_sample_losses(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        losses: torch.Tensor,
        simulation_ids: np.ndarray | None,
    ) -> None:
        """After backward of one micro-batch: `losses` is the loss of each of its
        samples (``[batch]``, detached, on the device: no host sync unless the hook
        makes one), `simulation_ids` their ``simulation_id`` (int64, in the batch's
        order; None when the samples carry none). Fired only when some hook overrides
        this method; the step's loss is then their mean
        (`OnlineTrainer.compute_sample_losses`)."""

    def on_after_backward(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, loss: Any
    ) -> None:
        """After backward of one micro-batch; `loss` is the detached loss tensor."""

    def on_simulation_losses(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        updated: dict[int, SimulationLoss],
    ) -> None:
        """The per-simulation losses were reduced over ranks: `updated` maps each
        simulation that had samples trained on since the last reduction to its statistic
        (identical on all ranks); `trainer.simulation_losses` has every simulation's.
        Fired by the `SimulationLossTracker` in its `on_step_end`, before the other
        hooks' when the trainer or the source installed it (first)."""

    def on_step_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """After the optimizer step; `state.global_step` counts it already. The actions
        requested by now are performed right after."""

    def on_log(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float],
    ) -> None:
        """Training logs (identical on all ranks): loss, lr, samples/s, buffer figures."""

    def on_validation_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """Before the validation loop."""

    def on_validation_end(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float],
    ) -> None:
        """Validation metrics, reduced over ranks (identical on all ranks); the trainer
        has recorded `metric_for_best_model` in `state.best_metric` and
        `state.validations_since_best` already."""

    def on_save(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        """A checkpoint is complete at `path` (already renamed into place)."""

    def on_loop_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """After the last step (every rank at the same step), before the final actions:
        set `control.should_log`, `should_validate` or `should_save` here to have them
        done at the end. `trainer.preempted_by` tells a preemption (None otherwise)."""

    def on_preempted(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """The run is preempted (`trainer.preempted_by`: the signal), its checkpoint
        written, on every rank; next the source is stopped (a study then kills its
        simulations without waiting for their data) and TRAIN_END fires. Requests
        made here are ignored, with a warning."""

    def on_train_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        """Last: after the final log, validation and save, with the source stopped (the
        simulations gone); also before `Preempted` is raised. Requests made here are
        ignored, with a warning (make them in `on_loop_end`)."""
