"""Checks of counts, durations and directories given to the library: one
implementation per rule.

Every part of the library that takes a count (a capacity, a number of restarts, a
design size) or a duration in seconds checks it here, so that one rule is written once.
What varies between callers is kept explicit:

* which values count as integers (`as_int`): a Python `int` only, also numpy's integers
  and other `__index__` objects (``numpy=True``), also integral floats (``floats=True``);
  `bool` never, although it is an `int` subclass;
* the wording of the error, which users and tests read, in two families: "``x`` must be
  an int >= 1, not ..." (`check_count`, `check_positive_int`, `check_non_negative_int`)
  and "``x`` must be an integer >= 1, got ..." (`as_count`); and for the lists of problems
  that `TrainingArguments` and `BufferConfig` report at once, `count_problem`;
* a directory to be created or written (`directory_problem`): refused when a file
  stands at its place or at one of its parents'.

Standard library only: the client (numpy and pyzmq, no torch) and the launcher use it.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

__all__ = [
    "as_count",
    "as_int",
    "check_count",
    "check_non_negative_int",
    "check_positive_int",
    "check_seconds",
    "count_problem",
    "directory_problem",
]


def as_int(value: Any, *, numpy: bool = False, floats: bool = False) -> int | None:
    """`value` as a Python int if it is an integer, else None (a bool is never one).

    Args:
        numpy: also accept numpy's integers (and any object with ``__index__``).
        floats: also accept a float with an integral value (``3.0``).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if floats and isinstance(value, float):
        return int(value) if value.is_integer() else None
    if numpy:
        try:
            return operator.index(value)
        except TypeError:
            return None
    return None


def _check_int(name: str, value: Any, low: int, words: str, *, numpy: bool = False) -> int:
    """`value` as an int >= `low`, or ValueError "`name` must be `words`, not `value`"."""
    number = as_int(value, numpy=numpy)
    if number is None or number < low:
        raise ValueError(f"{name} must be {words}, not {value!r}")
    return number


def check_count(name: str, value: Any, low: int, hint: str = "") -> int:
    """`value` if it is an int (not a bool) >= `low`; else ValueError
    "`name` must be an int >= `low` (`hint`), not `value`"."""
    hint = f" ({hint})" if hint else ""
    return _check_int(name, value, low, f"an int >= {low}{hint}")


def check_positive_int(name: str, value: Any) -> int:
    """`value` if it is an int (not a bool) >= 1; else ValueError
    "`name` must be a positive int, not `value`"."""
    return _check_int(name, value, 1, "a positive int")


def check_non_negative_int(name: str, value: Any, *, numpy: bool = False) -> int:
    """`value` as an int if it is an int (not a bool; with `numpy`, numpy's integers too)
    >= 0; else ValueError "`name` must be a non-negative int, not `value`"."""
    return _check_int(name, value, 0, "a non-negative int", numpy=numpy)


def as_count(
    name: str, value: Any, minimum: int, *, numpy: bool = True, floats: bool = True
) -> int:
    """`value` as an int >= `minimum` (which values are integers: `as_int`; by default
    numpy's integers and integral floats are); else ValueError
    "`name` must be an integer >= `minimum`, got `value`"."""
    number = as_int(value, numpy=numpy, floats=floats)
    if number is None or number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return number


def count_problem(
    name: str, value: Any, minimum: int = 1, optional_meaning: str | None = None
) -> str | None:
    """The problem with `value` as the count `name` (an integer, numpy's included, not a
    bool, >= `minimum`), as one line that says the fix, or None if it is one.

    With `optional_meaning`, None is allowed too (and the fix says what None means).
    """
    if value is None and optional_meaning is not None:
        return None
    number = as_int(value, numpy=True)
    if number is not None and number >= minimum:
        return None
    fix = f"set {name} >= {minimum}"
    if optional_meaning is not None:
        fix += f", or leave it unset (None) to {optional_meaning}"
    what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    return f"{name}={value!r} must be {what}: {fix}"


def check_seconds(name: str, value: Any, *, none: bool = True) -> float | None:
    """`value` if it is a duration: a number (not a bool) of seconds >= 0, or None where
    `none` (no bound); else ValueError naming `name`."""
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        allowed = "None (no bound) or " if none else ""
        raise ValueError(f"{name} must be {allowed}a number of seconds >= 0, not {value!r}")
    return value


def directory_problem(name: str, path: str) -> str | None:
    """None when `path` is a directory or can be made one, else the problem, naming
    `name` and the fix. Only a file in the way counts: the nearest existing of `path`
    and its parents must be a directory (permissions are the file system's to report,
    when the directory is made). Reads the file system; never creates anything."""
    for part in (Path(path), *Path(path).parents):
        if part.exists():  # follows links: a link to a directory is one
            if part.is_dir():
                return None
            where = "is a file" if part == Path(path) else f"is inside {str(part)!r}, a file"
            return f"{name}={path!r} {where}, not a directory: give a directory path"
    return None
