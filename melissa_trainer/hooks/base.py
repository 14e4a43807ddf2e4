"""The `Hook` base class and the dispatcher, `HookList`.

A hook observes the training loop at fixed events and asks for actions through
`TrainerControl`. It reads `TrainerState` and the trainer's public attributes; it never
advances counters or touches the trainer's private state.

The events (`Event`, with the training loop in pseudocode) are in
`melissa_trainer.hooks.events`; `Event` still imports from here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from melissa_trainer.core.figures import refuse_trainer_figures
from melissa_trainer.core.state import TrainerControl, TrainerState
from melissa_trainer.hooks.eval_figures import AddedKeys, add_eval_figures, eval_key
from melissa_trainer.hooks.events import Event
from melissa_trainer.hooks.method_check import check_methods, checked_state
from melissa_trainer.hooks.raised import call_naming

__all__ = ["STATE_FILE", "Event", "Hook", "HookList", "HookStateMismatch"]

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover - import for annotations only
    import numpy as np
    import torch

    from melissa_trainer.core.loss_per_simulation import SimulationLoss
    from melissa_trainer.core.view import TrainerView
    from melissa_trainer.stream.starvation_watch import ReadClock


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


#: the file of a checkpoint that holds `HookList.state_dict` (every stateful hook's)
STATE_FILE = "hooks.json"


class HookList:
    """Calls hooks in order; per event, only the hooks that override its method.

    The per-event lists are built once, so an event nobody listens to costs one empty
    loop. Not thread-safe: hooks are called from the training thread only.
    """

    def __init__(self, hooks: Iterable[Hook] = ()) -> None:
        self.hooks: list[Hook] = []
        self._listeners: dict[Event, list[Any]] = {e: [] for e in Event}
        self._figures: list[Hook] = []  # the hooks that give log figures
        self._eval_figures: list[Hook] = []  # ... and validation metrics
        self._added = AddedKeys()  # keys hooks add to `logs` / `metrics`: warned about
        #: told of every dispatch to a listener, work of the training thread's own (set
        #: by the trainer: its source's starvation watch's, `study.starvation`), or None
        self.work: ReadClock | None = None
        #: the hook method being called now (the innermost, when a hook's call fires
        #: events of its own), None between calls: a trainer's direct call made there
        #: is a hook's (`TrainerActions`' log, evaluate, save_checkpoint under several
        #: ranks become requests) and is named by it
        self.firing: Any = None
        for hook in hooks:
            self.add(hook)

    def add(self, hook: Hook) -> None:
        if isinstance(hook, type) and issubclass(hook, Hook):  # hooks=[MyHook]
            raise TypeError(
                f"got the class {hook.__name__} where a hook belongs, not an instance of it: "
                f"pass {hook.__name__}() (hooks=[{hook.__name__}()])"
            )
        if not isinstance(hook, Hook):
            raise TypeError(
                "hooks must be instances of a subclass of melissa_trainer.Hook, got an "
                f"object of type {type(hook).__name__}"
            )
        if any(h.name == hook.name for h in self.hooks):
            raise ValueError(
                f"two hooks are named {hook.name!r}: override `name` to tell them apart "
                "(checkpoints store hook state by name)"
            )
        check_methods(hook, Hook)
        self.hooks.append(hook)
        if type(hook).log_figures is not Hook.log_figures:
            self._figures.append(hook)
        if type(hook).eval_figures is not Hook.eval_figures:
            self._eval_figures.append(hook)
        for event in Event:
            if getattr(type(hook), event.value) is not getattr(Hook, event.value):
                self._listeners[event].append(getattr(hook, event.value))

    def get(self, cls: type) -> Any:
        """The first hook that is an instance of `cls`, or None."""
        return next((h for h in self.hooks if isinstance(h, cls)), None)

    def log_figures(self, trainer: TrainerView) -> tuple[dict[str, float], frozenset[str]]:
        """Every hook's `Hook.log_figures` (the hooks that override it), and the keys
        reduced by their maximum. Raises ValueError when two hooks give one key."""
        figures: dict[str, float] = {}
        maxima: set[str] = set()
        for hook in self._figures:
            theirs = hook.log_figures(trainer)
            refuse_trainer_figures(f"hook {type(hook).__name__}", theirs)  # (source_* too)
            twice = sorted(set(theirs) & set(figures))
            if twice:
                raise ValueError(f"hook {hook.name} logs figures another hook logs: {twice}")
            figures.update(theirs)
            maxima |= set(hook.log_maxima) & set(theirs)
        return figures, frozenset(maxima)

    def eval_figures(self, trainer: TrainerView, metrics: dict[str, float]) -> None:
        """Add every hook's `Hook.eval_figures` to `metrics` (`hooks.eval_figures`)."""
        add_eval_figures(self._eval_figures, trainer, metrics)

    @property
    def eval_keys(self) -> frozenset[str]:
        """The metrics the hooks' `eval_keys` declare (with ``eval_``)."""
        return frozenset(eval_key(k) for h in self._eval_figures for k in h.eval_keys)

    def listens(self, event: Event) -> bool:
        return bool(self._listeners[event])

    def fire(self, event: Event, *args: Any) -> None:
        """Call `event`'s method of every listening hook with `args`; a key a hook
        adds to LOG's `logs` or VALIDATION_END's `metrics` is warned about (`AddedKeys`).
        `work` is told when the calls begin and end (none: nothing told)."""
        listeners = self._listeners[event]
        if not listeners:
            return
        work = self.work
        outer = None if work is None else work.work_began()
        try:
            watch = event in (Event.LOG, Event.VALIDATION_END)
            outer_method = self.firing
            try:
                for method in listeners:
                    before = set(args[-1]) if watch else None
                    self.firing = method
                    call_naming(method, args)  # (an error names the hook: `raised`)
                    if before is not None and not before.issuperset(args[-1]):
                        self._added.warn(method, event, set(args[-1]) - before)
            finally:
                self.firing = outer_method
        finally:
            if work is not None:
                work.work_ended(outer)

    def close(self) -> None:
        """Close every hook; the first exception is raised after all were closed, each
        later one logged (with its traceback) as it happens, never dropped."""
        error: Exception | None = None
        for hook in self.hooks:
            try:
                hook.close()
            except Exception as exc:  # keep closing the others, then report
                if error is None:
                    error = exc
                else:
                    logger.error(
                        "hook %r failed to close too (the first failure, %s, is raised)",
                        hook.name,
                        type(error).__name__,
                        exc_info=True,
                    )
        if error is not None:
            raise error

    def state_dict(self) -> dict[str, dict[str, Any]]:
        # Each hook's state is taken once: a state_dict may be costly (a serving
        # hook's counters under its lock) and need not return the same twice.
        # (checked here, not by the checkpoint's writer: its error names no hook)
        states = ((h.name, checked_state(h.name, h.state_dict())) for h in self.hooks)
        return {name: state for name, state in states if state}

    def check_own_states(self) -> None:
        """`checked_state` of the user's hooks' states, before the first step: else a
        state no checkpoint can keep fails the first save, perhaps `save_seconds` in.
        The library's hooks are left out: tested, and their `state_dict` may note what
        a checkpoint holds (a `Study`'s account)."""
        for hook in self.hooks:
            if not type(hook).__module__.startswith("melissa_trainer."):
                checked_state(hook.name, hook.state_dict())

    def load_state_dict(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        by_name = {h.name: h for h in self.hooks}
        for name, hook_state in states.items():
            if name not in by_name:
                raise HookStateMismatch(
                    f"the checkpoint holds state for hook {name!r}, which this trainer "
                    f"does not have (its hooks: {sorted(by_name)}): pass it in "
                    "OnlineTrainer(..., hooks=[...]) as the run that wrote the "
                    "checkpoint did (hooks are matched by their `name`)"
                )
            by_name[name].load_state_dict(hook_state)
