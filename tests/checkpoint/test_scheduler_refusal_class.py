"""A resume's scheduler refusals (`checkpoint.scheduler_class.check`: another class, one
added or removed, an unrecorded checkpoint's other settings) are `ConfigError`s, as the
checkpoints' other refusals of a run built otherwise (`checkpoint.reshard`), and still
ValueErrors for callers that catch those. Before, they were plain ValueErrors, which
``except ConfigError`` (a script's or a launcher's way to tell a configuration problem
from a crash) missed. Pure: `check` on checkpoint directories written here by hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.optim import lr_scheduler as L

from melissa_trainer.checkpoint.scheduler_class import STATE_FILE, check, record
from melissa_trainer.config.reading import ConfigError


def optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1)


def step_lr() -> Any:
    return L.StepLR(optimizer(), step_size=3, gamma=0.5)


def exponential() -> Any:
    return L.ExponentialLR(optimizer(), gamma=0.9)


def written(tmp_path: Path, scheduler: Any | None, recorded: bool = True) -> Path:
    """A checkpoint directory with `scheduler`'s class record (unless not `recorded`,
    as before the record) and its state file (with a scheduler)."""
    path = tmp_path / "checkpoint-20"
    path.mkdir()
    if recorded:
        record(path, scheduler)
    if scheduler is not None:
        torch.save(scheduler.state_dict(), path / STATE_FILE)
    return path


CASES: dict[str, tuple[Callable[[], Any] | None, Callable[[], Any] | None, bool, str]] = {
    "another class": (step_lr, exponential, True, "this run built ExponentialLR"),
    "removed": (step_lr, None, True, "this run has none"),
    "added": (None, exponential, True, "written without a learning-rate scheduler"),
    "unrecorded settings": (step_lr, exponential, False, "settings your ExponentialLR has not"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_scheduler_refusal_is_a_config_error(tmp_path: Path, case: str) -> None:
    theirs, mine, recorded, said = CASES[case]
    path = written(tmp_path, theirs() if theirs else None, recorded)
    with pytest.raises(ConfigError) as caught:  # (before: a plain ValueError)
        check(path, mine() if mine else None)
    assert isinstance(caught.value, ValueError)  # (callers catching ValueError still do)
    assert said in str(caught.value) and str(path) in str(caught.value), caught.value


def test_the_same_scheduler_is_not_refused(tmp_path: Path) -> None:
    check(written(tmp_path, step_lr()), step_lr())
