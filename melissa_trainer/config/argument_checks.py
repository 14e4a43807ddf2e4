"""The checks of `TrainingArguments`: every rule its fields obey, each problem named
with the field, its value and the fix (`argument_values.checked_values` collects them,
`TrainingArguments.__post_init__` raises them as one `ConfigError`), and the choices
each field allows.

Pure functions of the fields' converted values: no I/O but `directory_problem`'s and
`resume_problem`'s looks at the file system, no state. The buffer's own rules are `BufferConfig`'s
(`buffers.config.config_problems`), applied here under `TrainingArguments`' names.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from melissa_trainer.buffers.config import BUFFER_KINDS, config_problems
from melissa_trainer.common.checks import count_problem, directory_problem

__all__ = [
    "BUFFER_CHOICES",
    "BUFFER_DEVICE_CHOICES",
    "BUFFER_FIELDS",
    "CHECK_RESUME_PATH",
    "MIXED_PRECISION_CHOICES",
    "ON_SAVE_ERROR_CHOICES",
    "REPORT_TO_CHOICES",
    "SEED_MAX",
    "argument_problems",
    "direction_warning",
    "early_stopping_warning",
]

BUFFER_CHOICES = BUFFER_KINDS
#: Whether `resume_problem` looks for the `resume_from_checkpoint` path (True: arguments
#: made by the constructor or the command line, a typo named early). False while saved
#: arguments are read back (`TrainingArguments.from_dict` / `from_file`): an old run's
#: ``training_args.json`` names a checkpoint that rotation may since have deleted, and
#: reading it to inspect or reproduce the run must not fail for that; `train()` checks
#: the path all the same (`checkpoint.paths.resolve_resume`). A context variable: the
#: threads that build arguments meanwhile are not affected.
CHECK_RESUME_PATH: ContextVar[bool] = ContextVar("check_resume_path", default=True)
MIXED_PRECISION_CHOICES = ("no", "fp16", "bf16")
REPORT_TO_CHOICES = ("tensorboard", "none")
ON_SAVE_ERROR_CHOICES = ("stop", "continue")
BUFFER_DEVICE_CHOICES = ("host", "accelerator")

SEED_MAX = 2**32 - 1  # numpy's limit
#: BufferConfig field -> the TrainingArguments field that sets it
BUFFER_FIELDS = {
    "kind": "buffer",
    "capacity": "buffer_size",
    "watermark": "watermark",
    "seed": "seed",
    "max_sample_reuse": "max_sample_reuse",
    "draw_choices": "draw_choices",
    "sample_to_insert_ratio": "sample_to_insert_ratio",
    "sample_to_insert_tolerance": "sample_to_insert_tolerance",
    "batch_size": "batch_size",
    "batches_per_step": "gradient_accumulation_steps",
}


def direction_warning(values: Mapping[str, Any]) -> str | None:
    """A warning, naming both fields and the fix, when ``greater_is_better=True`` comes
    with a `metric_for_best_model` that is a loss (its name ends in ``loss``, case
    aside: HF's Trainer infers the direction by this rule); else None.

    A warning, not a problem: a user's metric so named may be better larger (a negated
    loss), but most often it is a slip that makes the "best" checkpoint the worst and
    early stopping wait for the loss to grow."""
    metric, greater = values["metric_for_best_model"], values["greater_is_better"]
    if greater is not True or not isinstance(metric, str):
        return None
    if not metric.strip().lower().endswith("loss"):
        return None
    return (
        f"greater_is_better=True with metric_for_best_model={metric!r}: a larger loss "
        "counts as better, so the best checkpoint is the one with the largest loss and "
        "early stopping waits for it to grow; set greater_is_better=False (the default), "
        "or choose a metric that is better larger"
    )


def early_stopping_warning(values: Mapping[str, Any]) -> str | None:
    """A warning, naming `eval_steps` and the fix, when `early_stopping_patience` is set
    without `eval_steps`; else None.

    The built-in hooks then validate once, at the end of training, where a stop changes
    nothing: early stopping cannot stop the run. A warning, not a problem: a hook of the
    user's that sets ``control.should_validate`` (at each pseudo-epoch's end, say) gives
    it the validations it needs, which no argument tells. (Hugging Face's Trainer
    refuses `EarlyStoppingCallback` without an evaluation strategy.)"""
    patience = values["early_stopping_patience"]
    if patience is None or values["eval_steps"] is not None:
        return None
    return (
        f"early_stopping_patience={patience!r} without eval_steps: the trainer validates "
        "only at the end of training, so early stopping cannot stop the run (unless a "
        "hook of yours sets control.should_validate); set eval_steps (--eval_steps N: a "
        "validation every N steps), or leave early_stopping_patience unset"
    )


def argument_problems(
    values: Mapping[str, Any], bad: set[str], buffer_values: Mapping[str, Any]
) -> list[str]:
    """Every problem of `values` (field name -> converted value), one line each naming
    the field and the fix; empty when there is none.

    `bad` names the fields whose conversion already failed (reported once, by the
    conversion: their rules are skipped here); `buffer_values` is the `BufferConfig`
    those fields make (`argument_values.buffer_values`), whose rules are reported
    under `BUFFER_FIELDS`' names. The compile options are `compile_options`' to check.
    """
    p: list[str] = []

    def ok(*names: str) -> bool:
        return not bad.intersection(names)

    def at_least_one(name: str, optional_meaning: str | None = None) -> None:
        value = values[name]
        if not ok(name) or value is None:  # None: typed Optional, or not allowed above
            return
        problem = count_problem(name, value, 1, optional_meaning)
        if problem is not None:
            p.append(problem)

    for name in ("output_dir", "metric_for_best_model"):
        if ok(name) and not values[name].strip():
            p.append(f"{name}={values[name]!r} is empty: give a non-empty string")
    for name in ("logging_dir", "resume_from_checkpoint"):
        value = values[name]
        if ok(name) and value is not None and not value.strip():
            p.append(f"{name}={value!r} is empty: give a path or leave it unset (None)")
    for name in ("output_dir", "logging_dir"):  # else a bare OSError when first written
        value = values[name]
        problem = directory_problem(name, value) if ok(name) and value else None
        if problem is not None:
            p.append(problem)
    if ok("resume_from_checkpoint", "output_dir") and CHECK_RESUME_PATH.get():
        problem = resume_problem(values["resume_from_checkpoint"], values["output_dir"])
        if problem is not None:
            p.append(problem)
    if values["overwrite_output_dir"] is True and values["resume_from_checkpoint"] is not None:
        p.append(
            f"overwrite_output_dir=True with resume_from_checkpoint="
            f"{values['resume_from_checkpoint']!r}: choose one (resume that run, or start "
            "afresh with the earlier checkpoints moved aside)"
        )
    if ok("seed") and not 0 <= values["seed"] <= SEED_MAX:
        p.append(f"seed={values['seed']!r} is out of range: use a value in [0, 2**32 - 1]")
    for name in ("logging_steps", "stop_sync_steps", "max_to_keep", "pseudo_epochs"):
        at_least_one(name)
    at_least_one("max_steps", "let the stream decide when training ends")
    at_least_one("eval_steps", "validate only at the end")
    at_least_one("save_steps", "save only at the end")
    seconds = values["save_seconds"]  # (inf and nan: refused by the conversion)
    if ok("save_seconds") and seconds is not None and seconds <= 0:
        p.append(
            f"save_seconds={seconds!r} must be > 0: give the wall-clock seconds between "
            "checkpoints (600, every 10 minutes, is the default), or None (--save_seconds "
            "none) to checkpoint by save_steps alone"
        )
    at_least_one("early_stopping_patience", "disable early stopping")
    losses = values["simulation_loss_steps"]
    if ok("simulation_loss_steps") and losses is not None and losses < 0:
        p.append(
            f"simulation_loss_steps={losses!r} must be >= 0: set a number of steps, 0 to "
            "turn per-simulation losses off, or leave it unset (None) for the default"
        )

    for name, choices in (("mixed_precision", MIXED_PRECISION_CHOICES),
                          ("report_to", REPORT_TO_CHOICES),
                          ("buffer_device", BUFFER_DEVICE_CHOICES),
                          ("on_save_error", ON_SAVE_ERROR_CHOICES)):  # fmt: skip
        value = values[name]
        if ok(name) and value not in choices:
            p.append(f"{name}={value!r} is not supported: choose one of {', '.join(choices)}")

    device_buffer = ok("buffer_device", "buffer") and values["buffer_device"] == "accelerator"
    if device_buffer and values["buffer"] != "reservoir" and values["buffer"] in BUFFER_CHOICES:
        p.append(
            f"buffer_device='accelerator' holds a reservoir on the device, not "
            f"buffer={values['buffer']!r}: set buffer='reservoir', or buffer_device='host'"
        )
    ratio = values["sample_to_insert_ratio"]
    if ok("sample_to_insert_ratio") and ratio is not None and ratio < 0:
        p.append(
            f"sample_to_insert_ratio={ratio!r} must be >= 0: give a positive ratio, 0 "
            "for no rate limit, or leave it unset (None) for the buffer's default"
        )
        bad = bad | {"sample_to_insert_ratio"}
    # the buffer's rules, stated once in BufferConfig, under `TrainingArguments`' names
    p.extend(
        config_problems(
            buffer_values,
            BUFFER_FIELDS,
            skip={"seed"} | {key for key, name in BUFFER_FIELDS.items() if name in bad},
        )
    )
    return p


def resume_problem(resume: str | None, output_dir: str) -> str | None:
    """None unless `resume` (`resume_from_checkpoint`) is a path that is not a directory:
    a typo ('lates', a step that was never saved) is then named with the fix when the
    arguments are made, before a model, a validation set or a trainer is built (the
    trainer's own check, that the directory is a checkpoint, comes at `train()`).
    ``"latest"`` and an empty value (refused above) are no path. Reads the file system."""
    if resume is None or not resume.strip() or resume == "latest" or os.path.isdir(resume):
        return None
    hint = " (did you mean 'latest'?)" if difflib.get_close_matches(resume, ["latest"]) else ""
    checkpoints = os.path.join(output_dir, "checkpoints")
    return (
        f"resume_from_checkpoint={resume!r} is not a directory{hint}: give 'latest' (the "
        f"newest checkpoint under {checkpoints}, or a fresh start when there is none) or "
        f"a checkpoint's directory ({os.path.join(checkpoints, 'checkpoint-STEP')})"
    )
