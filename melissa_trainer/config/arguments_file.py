"""A run's arguments as a file: `ArgumentsFile`, the base of `TrainingArguments` that
writes them as a JSON-serialisable dict (what a checkpoint's ``training_args.json``,
`ARGS_FILE`, holds) and reads them back from a mapping or a .json / .yaml file.

Reading back checks every rule of the fields but one: that a `resume_from_checkpoint`
path exists (saved arguments name the checkpoint their run resumed from, which rotation
may have deleted since; `train()` checks it: `argument_checks.CHECK_RESUME_PATH`).
Unknown keys are a `ConfigError` naming the closest field. Kept apart from
`arguments`, which holds the fields and their documentation; its users import these
names from there as before.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from melissa_trainer.config.argument_checks import CHECK_RESUME_PATH
from melissa_trainer.config.reading import ConfigError, load_config_file, unknown_key_problems

__all__ = ["ARGS_FILE", "ArgumentsFile"]

#: the file of a checkpoint that holds the run's `TrainingArguments.to_dict` (for
#: reference: a resumed run's own arguments win)
ARGS_FILE = "training_args.json"


class ArgumentsFile:
    """The file form of a dataclass of options (`TrainingArguments`, which derives from
    it): `to_dict` / `to_json` and `from_dict` / `from_file`, each other's inverse."""

    if TYPE_CHECKING:  # what the dataclass deriving from it has
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

        def __init__(self, **values: Any) -> None: ...

    def to_dict(self) -> dict[str, Any]:
        """Every field as a JSON-serialisable dict (what `from_dict` reads back)."""
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        """`to_dict()` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Build from a mapping of field names to values (what `to_dict` wrote); unknown
        keys are a ConfigError. Every rule is checked but one: that a
        `resume_from_checkpoint` path exists (saved arguments name the checkpoint their
        run resumed from, which rotation may have deleted since; `train()` checks it:
        `argument_checks.CHECK_RESUME_PATH`)."""
        if not isinstance(d, Mapping):
            raise ConfigError(
                f"expected a mapping of option names to values, got {type(d).__name__}",
                context=cls.__name__,
            )
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = [k for k in d if k not in names]
        if unknown:
            raise ConfigError(unknown_key_problems(unknown, names), context=cls.__name__)
        token = CHECK_RESUME_PATH.set(False)
        try:
            return cls(**d)
        finally:
            CHECK_RESUME_PATH.reset(token)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Self:
        """Build from a .json, .yaml or .yml file holding a flat mapping of options
        (a checkpoint's ``training_args.json``, a configuration file): `from_dict`'s
        checks, the `resume_from_checkpoint` path's existence left to `train()`."""
        return cls.from_dict(load_config_file(path))
