"""The checkpoint tests' small run: one process, one deterministic trainer, a checkpoint
every 10 steps, to write, copy and resume.

What it builds (the same for every test that uses it, so that a resumed run's losses are
an uninterrupted run's, and the tests' figures, like a StepLR's halvings at steps 7, 14,
21..., are those of one known run):

- `run_arguments`: `TrainingArguments` for `out`: batches of 8 from a FIFO buffer of 32
  samples (training from 16), a checkpoint every 10 steps, the stop agreed every 4
  steps, seed 11, no reporting, no progress bar; a test's overrides on top.
- `on_linear_samples`: an `OnlineTrainer` of a given model, arguments, optimizer and
  scheduler over 400 samples of ``helpers.linear_samples(seed=3)`` (FIFO: the order does
  not depend on the producer thread's pace).
- `small_trainer`: both, for ``helpers.small_model(0)`` and the optimizer and scheduler
  that the test's factories build on it; returned with them (`SmallRun`), not trained.

Imported by name (pytest's prepend import mode puts tests/checkpoint/ on `sys.path` for
the test files beside it, and tests/ for tests/helpers.py: tests/conftest.py).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

__all__ = [
    "SAMPLES",
    "BuildOptimizer",
    "BuildScheduler",
    "SmallRun",
    "copy_of",
    "exponential_lr",
    "on_linear_samples",
    "run_arguments",
    "sgd",
    "small_trainer",
    "step_lr",
    "warnings_of",
]

#: how many samples the source streams (400 / 8 = 50 steps' worth of new samples)
SAMPLES = 400

#: builds the optimizer on the model's parameters
BuildOptimizer = Callable[[Iterator[torch.nn.Parameter]], torch.optim.Optimizer]
#: builds the learning-rate scheduler on the optimizer
BuildScheduler = Callable[[torch.optim.Optimizer], Any]


class SmallRun(NamedTuple):
    """A built (not yet trained) small run: the trainer and the very optimizer and
    scheduler objects it was given (the tests read their state after `train`)."""

    trainer: OnlineTrainer
    optimizer: torch.optim.Optimizer
    scheduler: Any


def sgd(lr: float = 1e-2) -> BuildOptimizer:
    """A factory of plain SGD at `lr`."""
    return lambda params: torch.optim.SGD(params, lr=lr)


def step_lr(step_size: int = 7, gamma: float = 0.5) -> BuildScheduler:
    """A factory of a StepLR (the tests' default: the lr halved at steps 7, 14, 21...)."""
    return lambda optimizer: torch.optim.lr_scheduler.StepLR(
        optimizer, step_size=step_size, gamma=gamma
    )


def exponential_lr(gamma: float = 0.9) -> BuildScheduler:
    """A factory of an ExponentialLR (another class than `step_lr`'s)."""
    return lambda optimizer: torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=gamma)


def run_arguments(
    out: Path, max_steps: int, resume: str | None = None, **overrides: Any
) -> TrainingArguments:
    """The small run's arguments (module docstring), writing under `out`, stopping at
    `max_steps`, resuming from `resume` (None: afresh); `overrides` replace or add
    fields (``logging_steps=1``, ``max_to_keep=2``...)."""
    fields: dict[str, Any] = {
        "output_dir": str(out),
        "batch_size": 8,
        "buffer": "fifo",
        "buffer_size": 32,
        "watermark": 16,
        "max_steps": max_steps,
        "save_steps": 10,
        "stop_sync_steps": 4,
        "resume_from_checkpoint": resume,
        "report_to": "none",
        "disable_progress_bar": True,
        "seed": 11,
    }
    return TrainingArguments(**{**fields, **overrides})


def on_linear_samples(
    model: torch.nn.Module,
    args: TrainingArguments,
    optimizer: torch.optim.Optimizer,
    scheduler: Any = None,
    hooks: Iterable[Hook] = (),
) -> OnlineTrainer:
    """An `OnlineTrainer` of these over `SAMPLES` samples of
    ``linear_samples(seed=3)`` (x, y pairs: ``helpers.xy``), `hooks` after the built-in
    ones."""
    return OnlineTrainer(
        model,
        args,
        optimizer,
        scheduler,
        train_source=lambda rank, world: linear_samples(SAMPLES, seed=3),
        process_sample=xy,
        hooks=list(hooks),
    )


def small_trainer(
    out: Path,
    max_steps: int,
    resume: str | None = None,
    *,
    optimizer: BuildOptimizer | None = None,
    scheduler: BuildScheduler | None = None,
    hooks: Iterable[Hook] = (),
    **overrides: Any,
) -> SmallRun:
    """The small run (module docstring) of ``small_model(0)``, its optimizer built by
    `optimizer` (None: ``sgd(1e-2)``), its scheduler by `scheduler` (None: none);
    `overrides` go to `run_arguments`. Built in this order (arguments, model, optimizer,
    scheduler): the model's seeded initialisation comes first, as the tests' oracles
    assume."""
    args = run_arguments(out, max_steps, resume, **overrides)
    model = small_model(0)
    built = (optimizer or sgd())(model.parameters())
    schedule = scheduler(built) if scheduler is not None else None
    trainer = on_linear_samples(model, args, built, schedule, hooks)
    return SmallRun(trainer, built, schedule)


def copy_of(written: Path, tmp_path: Path) -> Path:
    """A copy of the output folder `written` (a module-scoped run's) at ``tmp_path/out``,
    for a test that resumes or changes it without touching the others' copy."""
    out = tmp_path / "out"
    shutil.copytree(written, out)
    return out


def warnings_of(caplog: pytest.LogCaptureFixture, text: str = "") -> list[str]:
    """The messages of the WARNING (or worse) records `caplog` holds that contain
    `text` (empty: all of them), in order."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and text in r.getMessage()
    ]
