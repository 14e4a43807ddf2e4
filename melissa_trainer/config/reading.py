"""Reading a configuration: its files, its values, and the errors that name each
problem. Shared by `TrainingArguments` (values from files and dicts) and
`ArgumentParser` (command-line strings); users import `ConfigError` from
`melissa_trainer`, the rest from here.

* `load_config_file`: a flat mapping of options from a .json, .yaml or .yml file;
* `convert_value`: the one conversion of an option's value to its field's type
  (numeric strings accepted: YAML reads ``1e-3`` as a string), `ConversionError` when
  it cannot;
* `ConfigError`: every problem of a configuration, one per line, each naming the field,
  its value and the fix (`UnknownArgumentError` for a name that is no field, with
  `unknown_key_problems`' suggestions).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import types
import typing
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from melissa_trainer.common.words import closest_name

__all__ = [
    "FALSE_WORDS",
    "NONE_WORDS",
    "TRUE_WORDS",
    "ConfigError",
    "ConversionError",
    "UnknownArgumentError",
    "convert_value",
    "load_config_file",
    "unknown_key_problems",
    "unwrap_optional",
]

#: words read as True / False / None (case-insensitive), from files and the command line
TRUE_WORDS = frozenset({"true", "t", "yes", "y", "on", "1"})
FALSE_WORDS = frozenset({"false", "f", "no", "n", "off", "0"})
NONE_WORDS = frozenset({"none", "null"})


class ConfigError(ValueError):
    """A configuration problem. `problems` holds one line per problem found."""

    def __init__(self, problems: str | Iterable[str], context: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.context = context
        if context is None:
            message = "\n".join(self.problems)
        elif len(self.problems) == 1:
            message = f"invalid {context}: {self.problems[0]}"
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            message = f"invalid {context} ({len(self.problems)} problems):\n{lines}"
        super().__init__(message)


class UnknownArgumentError(ConfigError, TypeError):
    """`TrainingArguments(...)` (or `ReceiverConfig(...)`) called with a name that is
    not one of its fields.

    A `TypeError`, as Python raises for any unexpected keyword argument (code that
    catches that keeps working), and a `ConfigError` whose problems suggest the
    closest field names.
    """


def unknown_key_problems(
    unknown: Iterable[str], valid: Iterable[str], what: str = "key"
) -> list[str]:
    """One line per unknown `what` (key, argument), suggesting the closest valid name
    (difflib)."""
    valid = sorted(valid)
    problems = []
    for key in sorted(unknown, key=str):
        close = closest_name(str(key), valid)
        if close is not None:
            problems.append(f"unknown {what} {key!r}: did you mean {close!r}?")
        else:
            problems.append(
                f"unknown {what} {key!r}: remove it (valid {what}s: {', '.join(valid)})"
            )
    return problems


def load_config_file(path: str | os.PathLike[str], fmt: str | None = None) -> dict[str, Any]:
    """Read a flat mapping of option names to values from a .json, .yaml or .yml file.

    `fmt` ("json" or "yaml") overrides the format chosen from the extension.
    """
    p = Path(path)
    if fmt is None:
        suffix = p.suffix.lower()
        if suffix == ".json":
            fmt = "json"
        elif suffix in (".yaml", ".yml"):
            fmt = "yaml"
        else:
            raise ConfigError(
                f"config file {str(p)!r} has unsupported extension {suffix or '(none)'!r}: "
                "use a .json, .yaml or .yml file"
            )
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist: check the path")
    text = p.read_text(encoding="utf-8")
    data: Any
    if fmt == "json":
        pairs: list[list[tuple[str, Any]]] = []  # each object's key-value pairs, in order

        def keep_pairs(kv: list[tuple[str, Any]]) -> dict[str, Any]:
            pairs.append(kv)
            return dict(kv)

        try:
            data = json.loads(text, object_pairs_hook=keep_pairs)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid JSON: {exc}") from exc
        # the top-level object is the last one closed
        _refuse_repeated(p, [k for k, _ in pairs[-1]] if pairs and isinstance(data, dict) else [])
    elif fmt == "yaml":
        import yaml

        try:
            data = yaml.safe_load(text)
            top = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid YAML: {exc}") from exc
        if isinstance(top, yaml.MappingNode):
            _refuse_repeated(p, [k.value for k, _ in top.value if isinstance(k, yaml.ScalarNode)])
        if data is None:  # an empty file
            data = {}
    else:
        raise ConfigError(f"fmt={fmt!r} is not supported: use 'json' or 'yaml'")
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {str(p)!r} holds a {type(data).__name__}, not a mapping: "
            "write one 'name: value' entry per option at the top level"
        )
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        raise ConfigError(f"config file {str(p)!r} has non-string keys {bad_keys}: quote them")
    return data


def _refuse_repeated(path: Path, keys: list[str]) -> None:
    """A `ConfigError` when a top-level key appears twice in the file at `path`: JSON and
    YAML readers keep the last value without a word (htrial44: ``batch_size: 8`` and,
    further down, ``batch_size: 16`` trained with 16), so one of the two is a mistake."""
    repeated = sorted(k for k, n in Counter(keys).items() if n > 1)
    if repeated:
        raise ConfigError(
            f"config file {str(path)!r} gives {', '.join(map(repr, repeated))} more than once: "
            "the readers keep the last silently, so keep the one you mean"
        )


class ConversionError(ValueError):
    """`convert_value` could not convert a value; the message says why and the fix."""


def unwrap_optional(annotation: Any) -> tuple[bool, Any]:
    """(whether None is allowed, the annotation without None) for `X | None`/Optional[X]."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) < len(typing.get_args(annotation)):
            inner = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
            return True, inner
    return False, annotation


def _number(value: Any) -> float | None:
    """`value` as a float when it is a number or a numeric string (not a bool)."""
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def convert_value(value: Any, annotation: Any) -> Any:
    """`value` (from a file, a dict or the command line) as the scalar type `annotation`.

    The one conversion of option values, used by `TrainingArguments` (for values from
    files and dicts) and by `ArgumentParser` (for command-line strings):

    * ``int``: integers, and strings or floats holding a whole number (``"64"``,
      ``"1e3"``, ``64.0``); ``float``: finite numbers and numeric strings (YAML reads
      ``1e-3`` as a string); ``bool``: booleans, 0/1 and the words of `TRUE_WORDS` /
      `FALSE_WORDS`; ``str``: strings and numbers (not booleans); ``pathlib.Path``:
      strings and paths;
    * ``X | None``: None, and for strings the words of `NONE_WORDS`, give None.

    Raises:
        ConversionError: naming the problem and the fix (not the field: the caller does).
        TypeError: an annotation other than these.
    """
    optional, base = unwrap_optional(annotation)
    if value is None or (
        optional and isinstance(value, str) and value.strip().lower() in NONE_WORDS
    ):
        if optional:
            return None
        raise ConversionError("must not be null: give a value or remove the key to use the default")
    if base is bool:
        text = value.strip().lower() if isinstance(value, str) else None
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        if text in TRUE_WORDS or text in FALSE_WORDS:
            return text in TRUE_WORDS
        raise ConversionError("is not a boolean: use true or false")
    if base is int:
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return int(value.strip())
        elif isinstance(value, int) and not isinstance(value, bool):
            return value
        number = _number(value)
        if number is not None and math.isfinite(number) and number.is_integer():
            return int(number)
        raise ConversionError("is not an integer: give a whole number")
    if base is float:
        number = _number(value)
        if number is None:
            raise ConversionError("is not a number: give a decimal number such as 0.5")
        if not math.isfinite(number):
            raise ConversionError("is not finite: give a finite number")
        return number
    if base is str:
        if isinstance(value, bool):
            raise ConversionError(
                "is a boolean, not a string: quote it in a YAML file (YAML reads bare "
                "yes/no/on/off as booleans); in code, give a string"
            )
        if isinstance(value, (str, int, float)):
            return str(value)
        raise ConversionError("is not a string")
    if base is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise ConversionError("is not a path: give a string")
    raise TypeError(f"unsupported annotation {annotation!r}")  # pragma: no cover
