"""Command-line parsing of dataclasses, like `transformers.HfArgumentParser`.

    parser = ArgumentParser(TrainingArguments, MyOwnArgs)
    training_args, my_args = parser.parse_args_into_dataclasses()

Every dataclass field becomes a ``--field_name`` flag (``--field-name`` works too), typed
from its annotation, with the help text of ``metadata={"help": ...}`` (how each
is read from strings: `fields.FieldSpec`):

- ``int``, ``float``, ``str``, ``pathlib.Path``, converted by `reading.convert_value`
  (the conversion of values from files too: ``1e3`` is an int, ``0.5`` a float);
- ``X | None`` / ``Optional[X]``: the value ``none`` (or ``null``) gives None;
- ``bool``: ``--flag`` (true), ``--flag true|false|yes|no|1|0``, and ``--no_flag`` for
  fields whose default is True;
- ``Literal[...]``, ``Enum`` subclasses and ``metadata={"choices": (...)}``: one of the
  choices (matched case-insensitively);
- ``list[X]``: one or more values (``--sizes 1 2 3``).

``ArgumentParser(..., defaults={"buffer": "reservoir"})`` replaces dataclass defaults
(an example's own settings): ``--help`` shows them. ``--config path.{json,yaml,yml}``
loads values from a file; the file overrides the defaults, flags override the file.

Every bad value on the command line is an argparse error (exit status 2, no
traceback) naming where it came from: an unknown flag (a Hugging Face name told what
replaces it: `hf_names`), a value of the wrong type or
not among the choices (``argument --batch_size: 'abc' is not an integer ...``), a value
the dataclass rejects (``argument --watermark: watermark=10 is larger than
buffer_size=5 ...``, from `TrainingArguments.__post_init__` or a `ValueError` of any
dataclass's ``__post_init__``), what this machine's training device cannot run
(``argument --mixed_precision: mixed_precision='fp16' on cpu: ...``, CUDA graphs off
CUDA: `device_checks`, which `TrainingArguments` built in Python meets only when the
trainer is made), and a bad key or value in the ``--config`` file (``in --config
run.yaml, key 'batch_size': ...``; these words are `parse_errors`'). `parse_dict` and
the file methods raise these problems as a `ConfigError` instead.

Under ``accelerate launch --num_processes N``, an error of the command line's syntax
(an unknown flag, a wrong type or choice, a missing flag: every rank parses the same
``sys.argv``) is printed by rank 0 only, every rank exiting 2 (`common.refusal`), and
so is ``--help`` (every rank exiting 0); what is checked against files (``--config``,
the dataclasses' checks) or against the machine (its device, which nodes may differ
in) is said by every rank, each alone (no collective: no rank waits on another).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import os
import re
import sys
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from melissa_trainer.common.refusal import elsewhere, launch_rank
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.device_checks import device_problems, planned_device_type
from melissa_trainer.config.fields import FieldSpec

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.config.fields import str_to_bool as str_to_bool
from melissa_trainer.config.hf_names import unknown_name_problems
from melissa_trainer.config.parse_errors import invalid_message, unrecognized_message
from melissa_trainer.config.reading import ConfigError, load_config_file, unknown_key_problems

__all__ = ["ArgumentParser"]

_CONFIG_DEST = "_config_file_"


class _HelpOnRankZero(argparse.Action):
    """``--help`` under a launcher: every rank parses the same ``sys.argv``, so every rank
    would print the same help text; rank 0 prints it and exits 0 (argparse's own help),
    every other rank exits 0 without printing (`common.refusal.elsewhere`, as for a bad
    flag)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        rank = launch_rank()
        if rank != 0:
            raise elsewhere(SystemExit(0), rank)
        parser.print_help()
        parser.exit()


class ArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose flags come from dataclass fields.

    Args:
        *dataclass_types: the dataclass types to fill (or one list of them); a field name
            may belong to only one of them.
        config_flag: name of the flag that loads a JSON/YAML file (None: no such flag).
        defaults: field name -> value replacing the dataclass default, e.g. what an
            example runs with: ``--help`` shows it, and values from a file, a dict or
            the command line override it (in that order of precedence, lowest first).
        **kwargs: passed to `argparse.ArgumentParser` (``allow_abbrev`` defaults to
            False: flags must be spelled out).
    """

    def __init__(
        self,
        *dataclass_types: Any,
        config_flag: str | None = "config",
        defaults: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if len(dataclass_types) == 1 and isinstance(dataclass_types[0], (list, tuple)):
            dataclass_types = tuple(dataclass_types[0])
        if not dataclass_types:
            raise TypeError("ArgumentParser needs at least one dataclass type")
        for dtype in dataclass_types:
            if not (isinstance(dtype, type) and dataclasses.is_dataclass(dtype)):
                raise TypeError(f"{dtype!r} is not a dataclass type")
        kwargs.setdefault("allow_abbrev", False)
        add_help = kwargs.pop("add_help", True)
        super().__init__(add_help=False, **kwargs)
        self.add_help = add_help
        if add_help:  # argparse's own -h/--help, said by rank 0 only
            prefix = "-" if "-" in self.prefix_chars else self.prefix_chars[0]
            self.add_argument(
                prefix + "h",
                prefix * 2 + "help",
                action=_HelpOnRankZero,
                default=argparse.SUPPRESS,
                help="show this help message and exit",
            )
        self.dataclass_types: tuple[type, ...] = tuple(dataclass_types)
        self.config_flag = config_flag
        self._specs: dict[str, FieldSpec] = {}
        self._field_defaults: dict[str, Any] = dict(defaults or {})
        if config_flag is not None:
            self.add_argument(
                f"--{config_flag}",
                dest=_CONFIG_DEST,
                metavar="PATH",
                default=argparse.SUPPRESS,
                help="JSON or YAML file of option values; command-line flags override it.",
            )
        for dtype in self.dataclass_types:
            self._add_dataclass_arguments(dtype)
        unknown = [name for name in self._field_defaults if name not in self._specs]
        if unknown:
            problems = unknown_key_problems(unknown, self._specs)
            raise ValueError(f"ArgumentParser(defaults=...): {'; '.join(problems)}")

    def _add_dataclass_arguments(self, dtype: type) -> None:
        hints = typing.get_type_hints(dtype)
        group = self.add_argument_group(dtype.__name__)
        for f in dataclasses.fields(dtype):
            if not f.init:
                continue
            if f.name in self._specs:
                other = self._specs[f.name].owner.__name__
                raise ValueError(
                    f"field {f.name!r} is defined by both {other} and {dtype.__name__}"
                )
            if f.name == self.config_flag:
                raise ValueError(
                    f"field {dtype.__name__}.{f.name} clashes with the --{self.config_flag} "
                    "flag: pass config_flag=<another name> (or None) to ArgumentParser"
                )
            spec = FieldSpec(dtype, f, hints[f.name])
            self._specs[f.name] = spec
            overridden = f.name in self._field_defaults
            if overridden:
                spec.default = self._field_defaults[f.name]
            default = spec.default
            if isinstance(default, enum.Enum):
                default = default.value
            if default is dataclasses.MISSING:
                help_text = f"{spec.help} (required)".strip()
            elif "(default" in spec.help and not overridden:
                help_text = spec.help  # the field's own words for its default
            else:
                # an overridden default replaces the field's words for its own
                text = _DEFAULT_NOTE.sub("", spec.help)
                help_text = f"{text} (default: {default})".strip()
            kwargs: dict[str, Any] = dict(dest=f.name, default=argparse.SUPPRESS)
            if spec.is_bool:
                kwargs.update(nargs="?", const=True, type=spec.convert, metavar="{true,false}")
            else:
                kwargs.update(type=spec.convert, nargs=spec.nargs, metavar=spec.metavar)
            _add_with_alias(group, f.name, help=help_text, **kwargs)
            if spec.is_bool and spec.default is True:
                _add_with_alias(
                    group,
                    f"no_{f.name}",
                    help=f"Set {f.name} to false.",
                    dest=f.name,
                    action="store_false",
                    default=argparse.SUPPRESS,
                )

    # ------------------------------------------------------------------ parsing

    def parse_args_into_dataclasses(
        self, args: Sequence[str] | None = None, return_remaining_strings: bool = False
    ) -> tuple[Any, ...]:
        """Parse `args` (default: ``sys.argv[1:]``) into one instance per dataclass type.

        Flags added with `add_argument` come back after them in one `argparse.Namespace`
        (when there are any). With `return_remaining_strings`, unknown flags are returned
        as a last element (a list of strings) instead of being an error.
        """
        namespace, remaining = self.parse_known_args(args)
        if remaining and not return_remaining_strings:
            argv = list(sys.argv[1:] if args is None else args)
            self.error(unrecognized_message(remaining, argv, self._actions, self.config_flag))
        values = vars(namespace)
        config_path = values.pop(_CONFIG_DEST, None)
        # a script's own flags (its `add_argument`s): one Namespace after the dataclasses,
        # as HfArgumentParser returns them (they were refused as unknown keys)
        own = argparse.Namespace(**{k: values.pop(k) for k in list(values) if k not in self._specs})
        from_file: dict[str, Any] = {}
        if config_path:
            try:
                from_file = load_config_file(config_path)
            except ConfigError as exc:
                self._error_on_every_rank(f"argument --{self.config_flag}: {exc}")
        merged = {**from_file, **values}
        missing = [
            name
            for name, spec in self._specs.items()
            if spec.default is dataclasses.MISSING and name not in merged
        ]
        if missing:
            flags = ", ".join(f"--{name}" for name in missing)
            say = self._error_on_every_rank if config_path else self.error
            say(f"the following arguments are required: {flags}")
        try:
            outputs = self.parse_dict(merged)
            # what this machine's device cannot run (HF-style arguments built in Python
            # meet it when the trainer is made): said here, before anything starts
            problems = [
                problem
                for args in outputs
                if isinstance(args, TrainingArguments)
                for problem in device_problems(
                    args.mixed_precision, args.compile_options(), planned_device_type
                )
            ]
            if problems:
                raise ConfigError(problems)
        except ValueError as exc:  # ConfigError, or a dataclass's own __post_init__ check
            problem = invalid_message(exc, values, from_file, self.config_flag, config_path)
            self._error_on_every_rank(problem)
        outputs = (*outputs, own) if vars(own) else outputs
        return (*outputs, remaining) if return_remaining_strings else outputs

    def parse_dict(self, d: Mapping[str, Any], allow_extra_keys: bool = False) -> tuple[Any, ...]:
        """One instance per dataclass type from a flat mapping of field names to values.

        Keys belonging to none of the dataclasses are a `ConfigError` (with the closest
        valid name suggested) unless `allow_extra_keys`. Strings are converted to the
        field's type where it is numeric, boolean, a Path, an Enum or has choices. The
        parser's `defaults` fill the keys `d` lacks.
        """
        if not isinstance(d, Mapping):
            raise ConfigError(f"expected a mapping of option names to values, got {d!r}")
        unknown = [key for key in d if key not in self._specs]
        if unknown and not allow_extra_keys:
            raise ConfigError(unknown_name_problems(unknown, self._specs), context="configuration")
        d = {**self._field_defaults, **d}
        problems: list[str] = []
        kwargs_per_type: dict[type, dict[str, Any]] = {t: {} for t in self.dataclass_types}
        for key, value in d.items():
            spec = self._specs.get(key)
            if spec is None:
                continue
            if isinstance(value, str) and spec.coerce_files and not _self_validated(spec):
                try:
                    value = spec.convert(value)
                except (argparse.ArgumentTypeError, ValueError) as exc:
                    problems.append(f"{key}={value!r} is invalid: {exc}")
            kwargs_per_type[spec.owner][key] = value
        missing = [
            n for n, s in self._specs.items() if s.default is dataclasses.MISSING and n not in d
        ]
        problems += [f"{n} is required: give it a value" for n in missing]
        if problems:
            raise ConfigError(problems, context="configuration")
        return tuple(dtype(**kwargs_per_type[dtype]) for dtype in self.dataclass_types)

    def parse_json_file(
        self, path: str | os.PathLike[str], allow_extra_keys: bool = False
    ) -> tuple[Any, ...]:
        """`parse_dict` of a JSON file."""
        return self.parse_dict(load_config_file(path, fmt="json"), allow_extra_keys)

    def parse_yaml_file(
        self, path: str | os.PathLike[str], allow_extra_keys: bool = False
    ) -> tuple[Any, ...]:
        """`parse_dict` of a YAML file."""
        return self.parse_dict(load_config_file(path, fmt="yaml"), allow_extra_keys)

    # ------------------------------------------------------------------ errors

    def error(self, message: str) -> typing.NoReturn:
        """argparse's error (usage and `message` on stderr, exit status 2) for what every
        rank of a launch meets alike, the command line's syntax: said by rank 0 only,
        every other rank exiting with status 2 silently (`common.refusal`)."""
        rank = launch_rank()
        if rank != 0:
            raise elsewhere(SystemExit(2), rank)
        super().error(message)

    def _error_on_every_rank(self, message: str) -> typing.NoReturn:
        """argparse's error on every rank: for what was checked against files (which may
        differ between nodes), so that no rank's own problem goes unsaid."""
        super().error(message)


def _add_with_alias(group: Any, name: str, help: str, **kwargs: Any) -> None:
    """Add ``--name``, and ``--name-with-hyphens`` as an alias hidden from --help."""
    group.add_argument(f"--{name}", help=help, **kwargs)
    hyphen = name.replace("_", "-")
    if hyphen != name:
        group.add_argument(f"--{hyphen}", help=argparse.SUPPRESS, **kwargs)


#: a field's own "(default: ...)" note in its help text (one level of parentheses inside)
_DEFAULT_NOTE = re.compile(r"\s*\(default[: ][^()]*(?:\([^()]*\)[^()]*)*\)")


def _self_validated(spec: FieldSpec) -> bool:
    """TrainingArguments converts and checks its own fields, collecting every problem."""
    return issubclass(spec.owner, TrainingArguments) and spec.name in _TRAINING_FIELDS


_TRAINING_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainingArguments))
