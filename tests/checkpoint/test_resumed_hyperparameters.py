"""On resume the optimizer's hyperparameters are the checkpoint's (torch's
`load_state_dict` replaces the param groups' values): a value the script now builds
otherwise is named in one warning; a learning rate that the scheduler moved is no
change; and the documented way to change one (docs/resume.md, "Optimizer
hyperparameters on resume": `load_checkpoint` by hand, then set it) takes effect.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from small_run import copy_of, small_trainer, step_lr, warnings_of

from melissa_trainer import OnlineTrainer
from melissa_trainer.checkpoint.resumed_args import changed_hyperparameters, hyperparameters

pytestmark = pytest.mark.timeout(180)


def trainer_for(
    out: Path, max_steps: int, resume: str | None, lr: float, weight_decay: float = 0.0
) -> tuple[OnlineTrainer, torch.optim.Optimizer]:
    """The small run (small_run.py), AdamW and a StepLR(step_size=7, gamma=0.5)."""
    run = small_trainer(
        out,
        max_steps,
        resume,
        optimizer=lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay),
        scheduler=step_lr(),
    )
    return run.trainer, run.optimizer


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return warnings_of(caplog, "hyperparameters")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 20 steps at lr 1e-2, weight decay 0.01: checkpoint-10 and -20."""
    out = tmp_path_factory.mktemp("written") / "out"
    trainer_for(out, 20, None, 1e-2, weight_decay=0.01)[0].train()
    return out


def test_a_hyperparameter_changed_in_the_script_is_named(
    written: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:

    out = copy_of(written, tmp_path)
    trainer, optimizer = trainer_for(out, 30, "latest", 1e-3, weight_decay=0.0)
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert len(said(caplog)) == 1, said(caplog)
    message = said(caplog)[0]
    assert "param_groups[0].initial_lr 0.001 -> 0.01" in message, message
    assert "param_groups[0].weight_decay 0.0 -> 0.01" in message, message
    assert "param_groups[0].lr " not in message, message  # the scheduler's: compared as initial_lr
    assert "checkpoint's, which apply" in message and "docs/resume.md" in message, message
    # what the warning says: the checkpoint's apply (1e-2 halved at steps 7, 14, 21, 28)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5**4)
    assert optimizer.param_groups[0]["weight_decay"] == 0.01


def test_the_same_script_resumed_is_no_change(
    written: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The lr at the checkpoint (halved twice by the scheduler) is not the lr built,
    and is no change of the script's."""

    out = copy_of(written, tmp_path)
    trainer, _ = trainer_for(out, 30, "latest", 1e-2, weight_decay=0.01)
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert said(caplog) == []


def test_the_documented_way_to_change_the_lr_on_resume(written: Path, tmp_path: Path) -> None:

    out = copy_of(written, tmp_path)
    trainer, optimizer = trainer_for(out, 30, None, 1e-2, weight_decay=0.01)
    trainer.load_checkpoint(out / "checkpoints" / "checkpoint-20")
    for group in optimizer.param_groups:  # (docs/resume.md's recipe)
        group["lr"] = 1e-3
        group["initial_lr"] = 1e-3
    trainer.train()
    assert trainer.state.global_step == 30
    # from 1e-3 at step 20, halved at steps 21 and 28 (StepLR computes from the group's lr)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * 0.5**2)


@pytest.mark.parametrize("built, warned", [(1e-3, False), (1e-2, True)])
def test_after_the_recipe_later_resumes_compare_the_new_lr(
    written: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    built: float,
    warned: bool,
) -> None:
    """The recipe sets `initial_lr` too: a later resume of a script that builds the new
    lr is no change, one that builds the old lr is named (without it: the reverse)."""

    out = copy_of(written, tmp_path)
    trainer, optimizer = trainer_for(out, 30, None, 1e-2, weight_decay=0.01)
    trainer.load_checkpoint(out / "checkpoints" / "checkpoint-20")
    for group in optimizer.param_groups:
        group["lr"] = 1e-3
        group["initial_lr"] = 1e-3
    trainer.train()  # (checkpoint-30 written with the new lr)
    later, _ = trainer_for(out, 40, "latest", built, weight_decay=0.01)
    with caplog.at_level(logging.WARNING):
        later.train()
    assert later.state.global_step == 40
    assert bool(said(caplog)) == warned, said(caplog)


def test_values_that_cannot_be_compared_are_left_out() -> None:
    built = [{"params": [1], "lr": 0.1, "betas": (0.9, 0.99), "foreach": None, "fn": len}]
    loaded = [{"params": [2], "lr": 0.2, "betas": [0.8, 0.99], "foreach": None, "fn": print}]
    assert changed_hyperparameters(hyperparameters(built), loaded) == [
        "param_groups[0].lr 0.1 -> 0.2",
        "param_groups[0].betas (0.9, 0.99) -> (0.8, 0.99)",
    ]
    # a cyclic scheduler's momentum moves with training: not compared
    cyclic = [{"lr": 0.1, "initial_lr": 0.1, "max_momentum": 0.95, "momentum": 0.9}]
    moved = [{"lr": 0.3, "initial_lr": 0.1, "max_momentum": 0.95, "momentum": 0.85}]
    assert changed_hyperparameters(hyperparameters(cyclic), moved) == []
