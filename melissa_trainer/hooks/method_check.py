"""The check of a hook's event methods when it is added (`HookList.add`): an ``on_*``
method that is no event (another library's callback name: `_OTHER_LIBRARIES` maps
them), or one that cannot take the trainer's arguments, is refused before training.
And the check of a hook's `state_dict` (`checked_state`): JSON, said naming the hook."""

from __future__ import annotations

import difflib
import inspect
import json
import re
import warnings
from typing import Any

from melissa_trainer.hooks.events import Event

__all__ = ["check_methods", "checked_state"]


_EVENT_NAMES = [e.value for e in Event]

#: other libraries' events around the optimizer step (HF's, Lightning's
#: ``on_before_optimizer_step``), where a callback reads the gradients: none here, and
#: what to write instead (htrial11: the refusal listed the events, not where the
#: gradients are; `AcceleratedStep`, `PlainStep` set ``sync_gradients``)
_AROUND_THE_OPTIMIZER = {
    "on_substep_end": "on_after_backward runs after each micro-batch's backward",
    **dict.fromkeys(
        ["on_pre_optimizer_step", "on_before_optimizer_step", "on_optimizer_step"],
        "the step's gradients are complete in on_after_backward when "
        "trainer.accelerator.sync_gradients is True (the step's last micro-batch; "
        "before clipping and the optimizer step, which sets them to None before "
        "on_step_end)",
    ),
}


#: other libraries' callback names -> this library's event (HF `TrainerCallback`,
#: Lightning's `Callback`): spelling alone points elsewhere (`on_train_begin` is nearer
#: to `on_train_end` than to `on_train_start`)
_OTHER_LIBRARIES: dict[str, list[str]] = {
    "on_train_begin": ["on_train_start"],
    "on_fit_start": ["on_train_start"],
    "on_fit_end": ["on_train_end"],
    "on_epoch_begin": ["on_pseudo_epoch_start"],
    "on_epoch_start": ["on_pseudo_epoch_start"],
    "on_epoch_end": ["on_pseudo_epoch_end"],
    "on_train_epoch_start": ["on_pseudo_epoch_start"],
    "on_train_epoch_end": ["on_pseudo_epoch_end"],
    "on_step_begin": ["on_step_start"],
    "on_train_batch_start": ["on_step_start"],
    "on_train_batch_end": ["on_step_end"],
    "on_evaluate": ["on_validation_end"],
    "on_validation_epoch_start": ["on_validation_start"],
    "on_validation_epoch_end": ["on_validation_end"],
    "on_save_checkpoint": ["on_save"],
    "on_load_checkpoint": ["on_load"],
    # no event does the same: no hint rather than the nearest spelling's wrong one
    **dict.fromkeys(
        [
            "on_init_end",
            "on_before_backward",
            "on_predict_start",
            "on_predict_end",
            "on_sanity_check_start",
            "on_sanity_check_end",
            "on_test_start",
            "on_test_end",
            "on_prediction_step",
            *_AROUND_THE_OPTIMIZER,
        ],
        [],
    ),  # fmt: skip
}


def check_methods(hook: Any, base: type) -> None:
    """Refuse, when the hook is added (before training starts), what would otherwise
    fail at the event's first firing, maybe hours in, or never run at all: an event
    method that cannot take the trainer's arguments, and an ``on_*`` method that is no
    event (``on_train_begin``, ``on_epoch_end``: names of other libraries' callbacks),
    which the trainer would never call. Raises TypeError naming the method and the fix.
    Warns (UserWarning) of an event method whose first parameter is named ``args``
    (Hugging Face's, for its arguments; here the trainer), and of one taking ``**kwargs``
    (Hugging Face passes ``model=`` and more there; here nothing: htrial44), and of an
    ``on_log`` that reads an ``eval_`` key from its logs (Hugging Face's on_log gets the
    evaluation's metrics; here on_validation_end does: htrial46), and of a ``state()``
    without ``state_dict`` (Hugging Face's ExportableState: `_warn_exportable_state`).
    `base` is `Hook` (passed in: `hooks.base` imports this module), whose methods give
    the arguments each event passes."""
    cls = type(hook)
    for name in dir(cls):
        if not name.startswith("on_") or not callable(getattr(cls, name)):
            continue
        if name not in _EVENT_NAMES:
            close = (
                _OTHER_LIBRARIES[name]
                if name in _OTHER_LIBRARIES
                else difflib.get_close_matches(name, _EVENT_NAMES, n=1)
            )
            hint = f"did you mean {close[0]}? " if close else ""
            if name in _AROUND_THE_OPTIMIZER:
                hint = f"no event does the same here: {_AROUND_THE_OPTIMIZER[name]}. "
            raise TypeError(
                f"{cls.__name__}.{name} is not a hook event, so the trainer would never "
                f"call it: {hint}The events are {', '.join(_EVENT_NAMES)}; rename a helper "
                "method so that it does not start with 'on_'"
            )
        if getattr(cls, name) is getattr(base, name):
            continue
        expected = list(inspect.signature(getattr(base, name)).parameters)[1:]  # no self
        try:
            signature = inspect.signature(getattr(hook, name))
            signature.bind(*expected)
        except ValueError:  # no signature to read (a builtin): left to the call
            continue
        except TypeError as exc:
            raise TypeError(
                f"{cls.__name__}.{name} cannot take the arguments the trainer passes "
                f"({exc}): define it as `def {name}(self, {', '.join(expected)})`"
            ) from None
        first = next(iter(signature.parameters.values()), None)
        # (`*args` is a generic wrapper's, not HF's TrainingArguments: htrial44)
        if (
            first is not None and first.name == "args" and first.kind is not first.VAR_POSITIONAL
        ):  # a ported Hugging Face callback's: a bare AttributeError later
            warnings.warn(
                f"{cls.__name__}.{name}'s first parameter is named 'args', as Hugging Face "
                "TrainerCallback's (its TrainingArguments): here it receives the trainer; "
                "rename it trainer and read trainer.args (trainer.args.logging_steps...)",
                UserWarning,
                stacklevel=2,
            )
        if name == Event.LOG.value:
            _warn_eval_keys_in_logs(cls, getattr(cls, name), signature)
        kinds = {p.kind for p in signature.parameters.values()}
        # HF's `**kwargs`, empty here, silently (a generic `*args, **kwargs` left alone)
        if inspect.Parameter.VAR_KEYWORD in kinds and inspect.Parameter.VAR_POSITIONAL not in kinds:
            warnings.warn(
                f"{cls.__name__}.{name} takes **kwargs, as Hugging Face TrainerCallback's "
                "(model=, optimizer=, lr_scheduler=...): the trainer passes none, so "
                "kwargs.get('model') is None; read trainer.model, trainer.optimizer, "
                "trainer.lr_scheduler (the first argument) instead",
                UserWarning,
                stacklevel=2,
            )
    _warn_exportable_state(cls, base)


def _warn_exportable_state(cls: type, base: Any) -> None:
    """Warn of a ``state()`` method without `state_dict`: Hugging Face's
    ``ExportableState`` (a callback's state in its checkpoints, restored by
    ``from_state``), which no checkpoint here calls: the state silently did not survive
    a resume (a user's trial)."""
    own_state_dict = getattr(cls, "state_dict", None) is not base.state_dict
    if not callable(getattr(cls, "state", None)) or own_state_dict:
        return
    warnings.warn(
        f"{cls.__name__} defines state(), as Hugging Face's ExportableState callbacks do "
        "to be kept in checkpoints: here no checkpoint calls it, so its state would not "
        "survive a resume. Define state_dict(self) (JSON values) and "
        "load_state_dict(self, state) instead (docs/how-to/hooks.md, 'State')",
        UserWarning,
        stacklevel=3,
    )


def _warn_eval_keys_in_logs(cls: type, method: Any, signature: inspect.Signature) -> None:
    """Warn when `method`, an ``on_log``, reads an ``eval_`` key from its logs
    (``logs["eval_loss"]``, ``logs.get("eval_loss")``, ``"eval_loss" in logs``): a ported
    Hugging Face callback's, whose `on_log` also receives the evaluation's metrics. Here
    a log holds the training figures only, so such a read never finds one, silently
    (htrial46). A method whose source cannot be read is left alone."""
    params = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    if not params:
        return
    try:
        source = inspect.getsource(method)
    except (OSError, TypeError):  # (defined in a REPL, or not a function)
        return
    logs = re.escape(params[-1].name)
    key = r"""["'](eval_\w*)["']"""
    found = re.search(
        rf"\b{logs}\s*\[\s*{key}|\b{logs}\s*\.\s*(?:get|pop)\(\s*{key}|{key}\s+(?:not\s+)?in\s+{logs}\b",
        source,
    )
    if found is None:
        return
    read = next(g for g in found.groups() if g)
    warnings.warn(
        f"{cls.__name__}.on_log reads {read!r} from its logs, as a Hugging Face callback "
        "does: here a log holds the training figures only (loss, learning_rate, ...), "
        "never a validation's, so it never finds it; a validation's metrics come to "
        "on_validation_end(self, trainer, state, control, metrics)",
        UserWarning,
        stacklevel=3,  # (this, check_methods, HookList.add)
    )


def checked_state(name: str, state: Any) -> Any:
    """`state`, hook `name`'s ``state_dict()``, when JSON can write it (checkpoints keep
    it in ``hooks.json``); else a TypeError naming the hook and the fix. Before
    (htrial44), a tensor in a hook's state failed the first save, training under way,
    with json's "Object of type Tensor is not JSON serializable", naming no hook; and a
    dict with int keys came back from a resume with string keys ({1: 2} as {"1": 2}),
    silently."""
    try:
        json.dumps(state)
        _refuse_other_keys(state, "state")
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"hook {name!r}: its state_dict() cannot be kept in a checkpoint ({exc}): "
            "return JSON values, numbers, strings, lists and dicts with string keys "
            "(float(x) of a tensor or numpy number, x.tolist() of an array)"
        ) from exc
    return state


def _refuse_other_keys(value: Any, where: str) -> None:
    """TypeError naming the first dict key in `value` that is not a string: JSON writes
    it as one, so the hook would load back another key than it saved."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"{where} has the key {key!r} ({type(key).__name__}), which JSON writes "
                    f"as the string {json.dumps(str(key))}: a resume would give it back so"
                )
            _refuse_other_keys(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _refuse_other_keys(item, f"{where}[{i}]")
