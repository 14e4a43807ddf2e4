"""What making a `TrainingArguments` checks, around the dataclass's ``__init__``.

* `refuse_unknown_names` (its ``__new__``'s, before ``__init__`` would raise a bare
  TypeError: ``unexpected keyword argument 'watermak'``): every keyword a field of the
  class (`dataclasses.fields`, so a user's dataclass subclass that adds its own fields
  too), an unknown one named with the closest field or the Hugging Face name it stands
  for (`hf_names.unknown_name_problems`); and `compile_options.refuse_compile_off`.
* `settle_values` (its ``__post_init__``'s): the mixed precision resolved against the
  launch's (`device_checks.resolve_mixed_precision`), every value converted, resolved
  and checked (`argument_values.checked_values`), the gradient clip's bound checked, and
  every problem raised together in one `ConfigError`; then the warnings (the script's
  mixed precision over the launch's, `argument_checks.direction_warning`), said at the
  line that made the arguments.

Pure but for the instance `settle_values` sets and the warnings it gives.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any

from melissa_trainer.config.argument_checks import direction_warning
from melissa_trainer.config.argument_values import checked_values
from melissa_trainer.config.compile_options import refuse_compile_off
from melissa_trainer.config.device_checks import resolve_mixed_precision
from melissa_trainer.config.hf_names import unknown_name_problems
from melissa_trainer.config.reading import ConfigError, UnknownArgumentError

__all__ = ["refuse_unknown_names", "settle_values"]

#: a warning's stack level from `settle_values`: past it, ``__post_init__`` and the
#: dataclass's ``__init__``, at the caller of the constructor
_CALLER = 4


def refuse_unknown_names(cls: type, kwargs: Mapping[str, Any]) -> None:
    """Raise `UnknownArgumentError` for keywords of `kwargs` that are no field of `cls`
    (a dataclass), and `ConfigError` for ``torch_compile=False`` with a compile option
    (`compile_options.refuse_compile_off`)."""
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = [key for key in kwargs if key not in names]
    if unknown:
        problems = unknown_name_problems(unknown, names, what="argument")  # (HF's too)
        raise UnknownArgumentError(problems, context=cls.__name__)
    refuse_compile_off(kwargs, cls.__name__)  # (explicit False with a backend: ConfigError)


def settle_values(args: Any, types: Mapping[str, Any]) -> None:
    """Set each field of `args` (a `TrainingArguments` just made; `types`: its fields'
    resolved annotations) to its converted, resolved value, or raise one `ConfigError`
    naming every problem (context: the class's name); then give the warnings."""
    # unset: the launch's (`resolve_mixed_precision`); a str from here on
    args.mixed_precision, launch_problem, said = resolve_mixed_precision(args.mixed_precision)
    # (`argument_values.checked_values` says what is converted, resolved, checked)
    values, problems = checked_values(vars(args), types)
    for name in types:
        setattr(args, name, values[name])
    problems += [launch_problem] if launch_problem else []
    clip = values["max_grad_norm"]
    if isinstance(clip, float) and math.isfinite(clip) and clip <= 0:  # (inf: converting)
        problems.append(
            f"max_grad_norm={clip!r} must be > 0: give the total norm "
            "to clip the gradients to (1.0 is Hugging Face's), or unset it (None)"
        )
    if problems:
        raise ConfigError(problems, context=type(args).__name__)
    if said is not None:  # the script's mixed precision wins over the launch's
        warnings.warn(said, UserWarning, stacklevel=_CALLER)
    said = direction_warning(values)
    if said is not None:  # (allowed: a negated loss may be so named; `direction_warning`)
        warnings.warn(said, UserWarning, stacklevel=_CALLER)
