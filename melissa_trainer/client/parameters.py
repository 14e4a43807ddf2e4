"""A simulation's parameters (`Client.parameters`): given to the `Client`, else read
from ``MELISSA_TRAINER_PARAMETERS`` (set by the launcher), judged as the C client judges
that variable (clients/c/src/env.c; tests/c/test_c_env_parity.py)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping

from melissa_trainer.common.json_words import json_fault, not_utf8

__all__ = [
    "ENV_PARAMETERS",
    "Parameters",
    "UnknownParameterError",
    "check_parameters",
    "lone_surrogate",
]

#: The simulation's parameters, a JSON object of name -> number (set by the launcher).
ENV_PARAMETERS = "MELISSA_TRAINER_PARAMETERS"
ORIGIN_ENV = f"from {ENV_PARAMETERS}, set by the launcher"


class UnknownParameterError(KeyError):
    """A simulation asked for a parameter it was not given; the message lists those it
    was given and where they come from (a `KeyError`, as a dict's missing key is)."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class Parameters(dict[str, float]):
    """A simulation's parameters (`Client.parameters`): a dict whose missing key is an
    `UnknownParameterError` naming the known parameters, not a bare ``KeyError``.

    Attributes:
        origin: where they came from (for the message).
    """

    def __init__(self, values: dict[str, float], origin: str) -> None:
        super().__init__(values)
        self.origin = origin

    def __missing__(self, key: str) -> float:
        if self:
            known = f"its parameters are {sorted(self)} ({self.origin})"
        else:
            known = (
                f"it has none: no {ENV_PARAMETERS} in its environment (a simulation started "
                f"by hand?); start it through the trainer's launcher, or give them: "
                f"{ENV_PARAMETERS}='{{\"{key}\": 0.5}}' or Client(parameters={{{key!r}: 0.5}})"
            )
        raise UnknownParameterError(f"this simulation has no parameter {key!r}: {known}")


def check_parameters(parameters: Mapping[str, float] | None) -> Parameters:
    """`parameters`, else the JSON object in `$MELISSA_TRAINER_PARAMETERS`, else none:
    string names, finite float values, in the given order.

    The variable is judged as the C client judges it (clients/c/src/env.c
    resolve_parameters: the same words): JSON (not: Python's json.loads reason, where,
    the value, an example), an object, each value a JSON number (not a string, not
    true, false, null, an array or an object: ``float`` would take "0.5" and true), finite
    (a literal past a double's range is inf). Given as `parameters`, any value ``float``
    takes."""
    if parameters is None and os.environ.get(ENV_PARAMETERS, "").strip():
        return Parameters(_from_env(os.environ[ENV_PARAMETERS]), ORIGIN_ENV)
    out: dict[str, float] = {}
    for key, value in (parameters or {}).items():
        if not isinstance(key, str):
            raise ValueError(f"parameter names must be strings, not {key!r}")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"parameter {key!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"parameter {key!r}: {number} is not finite")
        out[key] = number
    return Parameters(out, "given to the Client")


def _from_env(text: str) -> dict[str, float]:
    """The parameters of the variable's value `text` (see `check_parameters`)."""
    bad = not_utf8(text)
    try:
        parameters = json.loads(text)
    except json.JSONDecodeError as exc:  # (the C client's words: json_scan.h)
        why, at = json_fault(text, exc)
        if bad is not None and bad <= exc.pos:  # (C reads that string first)
            why, at = "a string is not valid UTF-8", bad
        raise ValueError(
            f"{ENV_PARAMETERS} is not valid JSON ({why} at character {at}): "
            f"{text!r}; give an object of name -> number, e.g. '{{\"k\": 0.5}}'"
        ) from None
    if bad is not None:  # (C: json_scan.c, mt_utf8_valid)
        raise ValueError(
            f"{ENV_PARAMETERS} is not valid JSON (a string is not valid UTF-8 at character "
            f"{bad}): {text!r}; give an object of name -> number, e.g. '{{\"k\": 0.5}}'"
        )
    if not isinstance(parameters, dict):
        raise ValueError(f"{ENV_PARAMETERS} must be a JSON object of name -> number")
    lone = lone_surrogate(text)
    if lone is not None:  # (C: env.c, json_scan.c mt_json_lone_surrogate)
        raise ValueError(
            f"{ENV_PARAMETERS} has a lone UTF-16 surrogate ({text[lone : lone + 6]} at "
            f"character {lone}), which is no character: {text!r}; give an object of name "
            f"-> number, e.g. '{{\"k\": 0.5}}'"
        )
    out: dict[str, float] = {}
    for key, value in parameters.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            shown = (
                "an array" if isinstance(value, list)
                else "an object" if isinstance(value, dict)
                else repr(value) if isinstance(value, str)
                else json.dumps(value)  # (true, false, null)
            )  # fmt: skip
            raise ValueError(f"{ENV_PARAMETERS}: parameter {key!r}: {shown} is not a number")
        try:
            number = float(value)
        except OverflowError:  # (an integer literal past a double: C's strtod says inf)
            number = math.inf if value > 0 else -math.inf
        if not math.isfinite(number):
            raise ValueError(f"{ENV_PARAMETERS}: parameter {key!r}: {number} is not finite")
        out[key] = number
    return out


def lone_surrogate(text: str) -> int | None:
    """The position of the first \\uXXXX escape of a lone UTF-16 surrogate (one not in
    a high-low pair) in the strings of `text`, JSON that json.loads has read; None if
    none. json.loads takes it into a str that no UTF-8 can hold (printing the name
    fails), the wire's HELLO would carry it escaped, and the C client cannot hold it
    (it read U+FFFD): both clients refuse it (json_scan.c mt_json_lone_surrogate)."""
    in_string, i = False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            in_string = not in_string
        elif in_string and ch == "\\":
            if text[i + 1] != "u":
                i += 2
                continue
            unit = int(text[i + 2 : i + 6], 16)
            if 0xD800 <= unit < 0xDC00 and text[i + 6 : i + 8] == "\\u":
                low = text[i + 8 : i + 12]
                if (
                    all(c in "0123456789abcdefABCDEF" for c in low)
                    and 0xDC <= int(low[:2], 16) < 0xE0
                ):
                    i += 12
                    continue
            if 0xD800 <= unit < 0xE000:
                return i
            i += 6
            continue
        i += 1
    return None
