"""Which hook raised: an error escaping a user's hook method names it.

Python's traceback names the function (``on_step_end``), not the class, and under
``accelerate launch`` the other ranks only said ``rank 1 failed: RuntimeError: boom
(see rank 1's log)``: a user with three hooks overriding ``on_step_end`` had to read the
failing rank's traceback to learn which one. `HookList.fire` calls each method through
`call_naming`, which marks the error with the hook's method and the step (`mark`): a
PEP 678 note, printed under the traceback's last line, and `raised_in`, which the other
ranks' line reads (`rank_failure.error_line`).

The library's own hooks are not marked: their errors (a study that failed, a refused
request) say what they are and are raised as written. An error already marked (a hook's
call that fired another hook's event, which raised) keeps the innermost hook.
"""

from __future__ import annotations

from typing import Any

__all__ = ["call_naming", "mark", "method_name", "raised_in"]

_ATTRIBUTE = "melissa_hook"  # (on the exception: the hook method that raised it)


def raised_in(error: BaseException) -> str | None:
    """The hook method that raised `error` ("WeightEMA.on_step_end"), or None."""
    where = getattr(error, _ATTRIBUTE, None)
    return where if isinstance(where, str) else None


def method_name(method: Any) -> str:
    """A hook's bound `method` as "Class.method" (a class made in a function too)."""
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", None)
    return repr(method) if owner is None or name is None else f"{type(owner).__name__}.{name}"


def mark(error: BaseException, method: Any, args: tuple[Any, ...]) -> None:
    """Mark `error`, raised by the hook `method` (a bound method) called with `args`
    (``trainer, state, ...``: the step is the state's), unless it is a library hook's or
    marked already; never raises (the error is what matters)."""
    owner = getattr(method, "__self__", None)
    if owner is None or type(owner).__module__.startswith("melissa_trainer."):
        return
    if not isinstance(error, Exception) or raised_in(error) is not None:
        return
    where = method_name(method)
    step = getattr(args[1] if len(args) > 1 else None, "global_step", "?")
    try:
        setattr(error, _ATTRIBUTE, where)
        error.add_note(f"(raised by the hook method {where}, at step {step})")
    except (AttributeError, TypeError):  # an exception type that takes no attribute
        pass


def call_naming(method: Any, args: tuple[Any, ...]) -> None:
    """``method(*args)``, an error it raises marked with the hook (`mark`)."""
    try:
        method(*args)
    except Exception as exc:
        mark(exc, method, args)
        raise
