"""The check of a sampler's box of bounds: what `BoxSampler` accepts, and why.

A bound is ``(low, high)`` or ``(low, high, scale)``, a tuple or a list (a JSON or
YAML configuration gives lists), where:

* `low` and `high` are real numbers (int, float, numpy numbers), finite, with
  ``low <= high``. ``low == high`` is accepted on purpose: it fixes the parameter
  (every draw gives that value; the samplers spread their points over the varying
  parameters only). A string ("0.1"), a bool, NaN or an infinity is refused: each is
  a configuration mistake that a conversion would hide (a string read from a file
  and never parsed, ``True`` for 1), not a bound.
* `scale` is "linear" (the default, what ``(low, high)`` means) or "log" (drawn
  log-uniformly, ``0 < low``), exactly: lowercase, no synonyms. "Log", "LOG",
  "logarithmic", "log10" are refused with the spelling to use, since a scale the
  library guessed at would be a scale the user did not choose.

Anything else (a set, whose order is not kept; a string or bytes, which are sequences
of characters; one, four or more elements) is refused. Every refusal is a ValueError
naming the parameter, the value given and the fix, raised when the sampler is built:
before the launcher starts any simulation.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SCALES", "check_bounds"]

#: the scale marks a bound may end with; "linear" is what a pair means
SCALES = ("linear", "log")

_FORM = '(low, high) for a linear scale, or (low, high, "log") for a log scale'


def check_bounds(bounds: Any) -> tuple[dict[str, tuple[float, float]], set[str]]:
    """`bounds` checked (see the module docstring): the ``(low, high)`` pairs as
    floats, in the order given, and the names of the log-scale parameters.

    Raises:
        ValueError: `bounds` is not a non-empty mapping, or a bound is not one the
            module docstring accepts; the message names the parameter, the value
            given and the fix.
    """
    if not isinstance(bounds, Mapping) or not bounds:
        raise ValueError(
            f"bounds must be a non-empty mapping {{name: (low, high)}}, not {bounds!r}"
        )
    out, log_scale = {}, set()
    for name, bound in bounds.items():
        low, high, scale = _bound(name, bound)
        out[name] = (low, high)
        if scale == "log":
            log_scale.add(name)
    return out, log_scale


def _bound(name: Any, bound: Any) -> tuple[float, float, str]:
    """One bound checked: ``(low, high, scale)``."""
    if isinstance(bound, np.ndarray) and bound.ndim == 1:
        bound = bound.tolist()  # an array of two numbers is a pair
    if not isinstance(bound, list | tuple):
        raise ValueError(
            f"bounds of {name!r} are the {type(bound).__name__} {bound!r}: give a tuple "
            f"or list {_FORM}"
        )
    if len(bound) not in (2, 3):
        raise ValueError(
            f"bounds of {name!r} are {bound!r}, {len(bound)} element(s) where 2 or 3 are "
            f"expected: give {_FORM}"
        )
    scale = bound[2] if len(bound) == 3 else "linear"
    if not isinstance(scale, str) or scale not in SCALES:
        raise ValueError(
            f"bounds of {name!r} end with the scale {scale!r}{_did_you_mean(scale)}: the "
            f'scale is "linear" (the default) or "log", exactly; give {_FORM}'
        )
    low = _number(name, "low", bound[0], bound)
    high = _number(name, "high", bound[1], bound)
    if low > high:
        swapped = (bound[1], bound[0], *bound[2:])
        raise ValueError(
            f"bounds of {name!r} need low <= high, not low={low:g} > high={high:g} (given "
            f"{bound!r}): swap them, {swapped!r} (low == high fixes {name!r} at that value)"
        )
    if scale == "log" and low <= 0:
        raise ValueError(
            f"bounds of {name!r} are on a log scale but low={low:g}: a log-scale "
            f"parameter needs 0 < low <= high; raise low above 0, or give {name!r} as "
            f"(low, high) to draw it linearly"
        )
    return low, high, scale


def _number(name: Any, which: str, value: Any, bound: Any) -> float:
    """`value`, the `which` ("low" or "high") of `bound`, as a finite float."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        fix = (
            f"give the number {value.strip()} without quotes (a string is refused, not parsed)"
            if isinstance(value, str) and _parses(value)
            else "give a number"
        )
        raise ValueError(
            f"bounds of {name!r}: {which}={value!r} ({type(value).__name__}) is not a "
            f"number, in {bound!r}; {fix}"
        )
    out = float(value)
    if not math.isfinite(out):
        raise ValueError(
            f"bounds of {name!r}: {which}={value!r} is not finite, in {bound!r}; a "
            f"sampler draws in a finite box: give finite numbers (a log scale, "
            f'(low, high, "log"), spreads a range of many decades)'
        )
    return out


def _parses(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _did_you_mean(scale: Any) -> str:
    """The scale `scale` is very likely meant as (another case, a longer spelling), as
    a hint for the message refusing it; "" when none is."""
    text = scale.strip().lower() if isinstance(scale, str) else ""
    if text.startswith("log") or text == "ln":
        # log10, log2 and ln draw the same log-uniform values: the base cancels
        return ' (did you mean "log"? a log scale is log-uniform, whatever the base)'
    if text.startswith("lin"):
        return ' (did you mean "linear"?)'
    return ""
