"""How one dataclass field is read from strings: its converter (through
`reading.convert_value`, the conversion of values from files too), its choices, its
default and its help text, for `parser.ArgumentParser`.

Every converter raises `argparse.ArgumentTypeError` on a bad string, which argparse
reports as ``argument --flag: ...`` (exit status 2), and `parser.ArgumentParser.parse_dict`
collects as a problem of the configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import pathlib
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from melissa_trainer.config.reading import (
    NONE_WORDS,
    ConversionError,
    convert_value,
    unwrap_optional,
)

__all__ = ["FieldSpec", "str_to_bool"]


def _named(func: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    func.__name__ = name  # argparse says "invalid <name> value: 'x'"
    return func


def _scalar(base: type) -> Callable[[str], Any]:
    """Command-line strings -> `base` through `convert_value` (one conversion for files
    and flags); a bad string is an argparse error (``argument --flag: 'x' is not ...``)."""

    def convert(text: str) -> Any:
        try:
            return convert_value(text, base)
        except ConversionError as exc:
            raise argparse.ArgumentTypeError(f"{text!r} {exc}") from None

    return _named(convert, base.__name__)


_to_bool = _scalar(bool)


def str_to_bool(text: str) -> bool:
    """Parse true/false, yes/no, on/off, 1/0 (case-insensitive; `reading.TRUE_WORDS`).

    Raises:
        argparse.ArgumentTypeError: any other word.
    """
    result: bool = _to_bool(text)
    return result


def _choice_converter(lookup: Mapping[str, Any], shown: Iterable[Any]) -> Callable[[str], Any]:
    """Map a string onto `lookup[text.lower()]`; other strings are an argparse error."""
    listed = ", ".join(str(c) for c in shown)

    def convert(text: str) -> Any:
        try:
            return lookup[text.strip().lower()]
        except KeyError:
            message = f"invalid choice: {text!r} (choose from {listed})"
            raise argparse.ArgumentTypeError(message) from None

    return convert


def _optional(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert_or_none(text: str) -> Any:
        return None if text.strip().lower() in NONE_WORDS else convert(text)

    return _named(convert_or_none, getattr(convert, "__name__", "value"))


class FieldSpec:
    """How one dataclass field is read from strings."""

    def __init__(self, owner: type, f: dataclasses.Field[Any], annotation: Any) -> None:
        self.owner, self.name = owner, f.name
        self.optional, base = unwrap_optional(annotation)
        self.is_bool = base is bool
        self.nargs: str | None = None
        self.metavar: str | None = None
        self.coerce_files = True  # convert strings read from files with `convert`
        choices = f.metadata.get("choices")
        if typing.get_origin(base) in (list, typing.List):  # noqa: UP006
            (base,) = typing.get_args(base) or (str,)
            self.nargs = "+"
        convert: Callable[[str], Any]
        if typing.get_origin(base) is Literal:
            choices = typing.get_args(base)
        if isinstance(base, type) and issubclass(base, enum.Enum):
            choices = [m.value for m in base]
            lookup = {str(m.value).lower(): m for m in base}
            convert = _choice_converter({m.name.lower(): m for m in base} | lookup, choices)
        elif choices:
            convert = _choice_converter({str(c).lower(): c for c in choices}, choices)
            self.coerce_files = self.nargs is None
        elif base in (bool, int, float, str, pathlib.Path):
            convert = _scalar(base)
            self.coerce_files = base is not str and self.nargs is None
        else:
            raise TypeError(
                f"{owner.__name__}.{f.name}: annotation {annotation!r} is not supported by "
                "ArgumentParser (use int, float, str, bool, Path, Literal, Enum, list[X], "
                "or one of them | None)"
            )
        if choices:
            self.metavar = "{" + ",".join(str(c) for c in choices) + "}"
        self.convert = _optional(convert) if self.optional else convert
        self.default: Any = dataclasses.MISSING
        if f.default is not dataclasses.MISSING:
            self.default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            self.default = f.default_factory()
        self.help = str(f.metadata.get("help", "")).replace("%", "%%")
