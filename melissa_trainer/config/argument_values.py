"""What `TrainingArguments`' values become when it is made, and what they resolve to.

`checked_values` is the whole of `TrainingArguments.__post_init__`'s work: each value
converted to its field's type (`reading.convert_value`: numeric strings accepted, a
value of the wrong type named), the choices normalised (stripped, lower case), the
compile options resolved as `transformers` does (`compile_options.resolve_options`),
and every rule of the fields checked (`argument_checks`, the buffer's under these
names). `buffer_values` and `compile_options_of` are what the fields make for the buffer
and for `torch.compile`.

Pure functions of a mapping of field names to values (a `TrainingArguments`' ``vars``):
no state, no I/O but `argument_checks`' look at the output directories.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from melissa_trainer.buffers.config import resolve_sample_to_insert_ratio
from melissa_trainer.config import compile_options as compiled
from melissa_trainer.config.argument_checks import BUFFER_FIELDS, argument_problems
from melissa_trainer.config.reading import ConversionError, convert_value

__all__ = [
    "CHOICE_FIELDS",
    "COMPILE_FIELDS",
    "buffer_values",
    "checked_values",
    "compile_options_of",
]

#: the fields whose value is one of a few words, read case-insensitively
CHOICE_FIELDS = ("mixed_precision", "buffer", "buffer_device", "report_to", "on_save_error")
#: the fields of `torch.compile`'s options, resolved together
COMPILE_FIELDS = ("torch_compile", "torch_compile_backend", "torch_compile_mode")


def checked_values(
    values: Mapping[str, Any], types: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """`values` (field name -> value as given) converted, normalised and resolved, and
    every problem found, one line each naming the field and the fix (empty: none).

    `types` maps each field to convert to its resolved annotation. A value that cannot
    be converted is reported once and left as it was given: the rules of that field
    are then skipped (as are the compile options' when one of theirs failed).
    """
    out = dict(values)
    problems: list[str] = []
    bad: set[str] = set()
    if out["mixed_precision"] is False:  # YAML 1.1 reads a bare `no` as false
        out["mixed_precision"] = "no"
    resume = out["resume_from_checkpoint"]
    if isinstance(resume, str) and resume.strip().lower() in ("true", "false"):
        resume = resume.strip().lower() == "true"  # the same boolean on a command line
    if isinstance(resume, bool):  # Hugging Face's True: the last one
        out["resume_from_checkpoint"] = "latest" if resume else None
    reporters = out["report_to"]  # Hugging Face's list of integrations' names:
    if isinstance(reporters, list | tuple) and all(isinstance(n, str) for n in reporters):
        out["report_to"], problem = _one_reporter(out["report_to"])
        if problem is not None:
            problems.append(problem)
            bad.add("report_to")
    for name, annotation in types.items():
        value = out[name]
        if name in bad:
            continue
        try:
            out[name] = convert_value(value, annotation)
        except ConversionError as exc:
            problems.append(f"{name}={value!r} {exc}")
            bad.add(name)
    for name in CHOICE_FIELDS:
        if name not in bad:
            out[name] = out[name].strip().lower()
    problems.extend(argument_problems(out, bad, buffer_values(out)))
    if not bad.intersection(COMPILE_FIELDS):
        problems.extend(_compile_problems(out))
    return out, problems


def _one_reporter(names: list[Any] | tuple[Any, ...]) -> tuple[Any, str | None]:
    """`report_to` given as Hugging Face's list: its one reporter (``"none"`` for an
    empty list or one of ``"none"`` alone), or the list and the problem when it names
    several (one reporter here)."""
    normalised = dict.fromkeys(str(n).strip().lower() for n in names)
    kept = [n for n in normalised if n != "none"]
    if len(kept) <= 1:
        return (kept[0] if kept else "none"), None
    return list(names), (
        f"report_to={list(names)!r} names {len(kept)} reporters: one here; give one of "
        "tensorboard, none"
    )


def _compile_problems(values: dict[str, Any]) -> list[str]:
    """`compile_options.resolve_options`' rules (those of `transformers`), applied to `values`
    (the three compile fields resolved in place), and CUDA graphs' refusal of gradient
    accumulation."""
    on, backend, mode, problems = compiled.resolve_options(
        values["torch_compile"], values["torch_compile_backend"], values["torch_compile_mode"]
    )
    values.update(torch_compile=on, torch_compile_backend=backend, torch_compile_mode=mode)
    options = compile_options_of(values)
    accumulation = values["gradient_accumulation_steps"]
    if options is not None and not problems and isinstance(accumulation, int):
        problem = compiled.accumulation_problem(options, accumulation)
        problems.extend([problem] if problem is not None else [])
    return problems


def compile_options_of(values: Mapping[str, Any]) -> compiled.CompileOptions | None:
    """What `torch.compile` is given for the training step; None without
    ``torch_compile``."""
    if not values["torch_compile"]:
        return None
    return compiled.CompileOptions(
        values["torch_compile_backend"] or compiled.DEFAULT_BACKEND, values["torch_compile_mode"]
    )


def buffer_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """`BufferConfig` field -> the value of the corresponding field of `values`
    (`BUFFER_FIELDS`), the sample-to-insert ratio resolved."""
    out = {key: values[name] for key, name in BUFFER_FIELDS.items()}
    epochs = values["pseudo_epochs"]
    # replayed, hence kept (a value that did not convert is reported by the conversion;
    # compared with 1 it was a bare TypeError)
    out["retain"] = isinstance(epochs, int) and epochs > 1
    # unset: the buffer's default ratio; 0: none (BufferConfig's None)
    out["sample_to_insert_ratio"] = resolve_sample_to_insert_ratio(
        out["kind"], out["sample_to_insert_ratio"], out["max_sample_reuse"]
    )
    return out
