"""The dispatcher of hooks, `HookList`; the `Hook` base class it dispatches to is in
`melissa_trainer.hooks.hook` and still imports from here, as `HookStateMismatch` does.

The events (`Event`, with the training loop in pseudocode) are in
`melissa_trainer.hooks.events`; `Event` still imports from here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from melissa_trainer.core.figures import refuse_trainer_figures
from melissa_trainer.hooks.eval_figures import AddedKeys, add_eval_figures, eval_key
from melissa_trainer.hooks.events import Event
from melissa_trainer.hooks.hook import Hook, HookStateMismatch
from melissa_trainer.hooks.method_check import check_methods, checked_state
from melissa_trainer.hooks.raised import call_naming

__all__ = ["STATE_FILE", "HookList"]

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover - import for annotations only
    from melissa_trainer.core.view import TrainerView
    from melissa_trainer.stream.read_clock import ReadClock


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
        #: told of each call of a hook method, and of its end (``enter(method, args)``,
        #: ``back_to(method, args)``), or None: under several ranks the trainer's
        #: `trainer.hook_mark.HookMark`, which keeps the user's hook method this rank is
        #: in where the other ranks can read it after this rank died in it
        self.marker: Any = None
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
            outer_method, marker = self.firing, self.marker
            try:
                for method in listeners:
                    before = set(args[-1]) if watch else None
                    self.firing = method
                    if marker is not None:
                        marker.enter(method, args)
                    call_naming(method, args)  # (an error names the hook: `raised`)
                    if before is not None and not before.issuperset(args[-1]):
                        self._added.warn(method, event, set(args[-1]) - before)
            finally:
                self.firing = outer_method
                if marker is not None:
                    marker.back_to(outer_method, args)
        finally:
            if work is not None:
                work.work_ended(outer)

    def close(self) -> None:
        """Close every hook; the first exception is raised after all were closed, each
        later one logged (with its traceback) as it happens, never dropped."""
        error: Exception | None = None
        marker, self.marker = self.marker, None
        if marker is not None:
            marker.close()
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
