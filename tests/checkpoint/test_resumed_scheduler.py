"""On resume the learning-rate scheduler's settings are the checkpoint's (its
`load_state_dict` replaces ``step_size``, ``gamma``, ``T_max``...): a setting the script
now builds otherwise is named in the resume's one warning of changed hyperparameters,
as the optimizer's ``param_groups`` are; the values that move with training are no
change; and the documented way to change one (docs/resume.md, "Optimizer
hyperparameters on resume": `load_checkpoint` by hand, then set it) takes effect.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from small_run import copy_of, small_trainer, step_lr, warnings_of

from melissa_trainer import OnlineTrainer
from melissa_trainer.checkpoint.resumed_args import scheduler_settings

pytestmark = pytest.mark.timeout(180)

L = torch.optim.lr_scheduler


def trainer_for(
    out: Path, max_steps: int, resume: str | None, step_size: int = 7, gamma: float = 0.5
) -> tuple[OnlineTrainer, Any]:
    """The small run (small_run.py), SGD at 1e-2 and a StepLR."""
    run = small_trainer(
        out,
        max_steps,
        resume,
        scheduler=step_lr(step_size, gamma),
    )
    return run.trainer, run.scheduler


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return warnings_of(caplog, "hyperparameters")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of 20 steps, StepLR(step_size=7, gamma=0.5): checkpoint-10 and -20."""
    out = tmp_path_factory.mktemp("written") / "out"
    trainer_for(out, 20, None)[0].train()
    return out


def test_a_scheduler_setting_changed_in_the_script_is_named(
    written: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = copy_of(written, tmp_path)
    trainer, scheduler = trainer_for(out, 30, "latest", step_size=3, gamma=0.9)
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert len(said(caplog)) == 1, said(caplog)
    message = said(caplog)[0]
    assert "StepLR.step_size 3 -> 7" in message, message
    assert "StepLR.gamma 0.9 -> 0.5" in message, message
    assert "checkpoint's, which apply" in message and "docs/resume.md" in message, message
    # what the warning says: the checkpoint's apply (halved at steps 7, 14, 21, 28)
    assert (scheduler.step_size, scheduler.gamma) == (7, 0.5)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5**4)


def test_the_same_scheduler_resumed_is_no_change(
    written: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = copy_of(written, tmp_path)
    trainer, _ = trainer_for(out, 30, "latest")
    with caplog.at_level(logging.WARNING):
        trainer.train()
    assert said(caplog) == []


def test_the_documented_way_to_change_a_scheduler_setting(
    written: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = copy_of(written, tmp_path)
    trainer, scheduler = trainer_for(out, 30, None)
    trainer.load_checkpoint(out / "checkpoints" / "checkpoint-20")
    scheduler.step_size = 4  # (docs/resume.md's recipe)
    trainer.train()
    # halved at steps 7 and 14 (before), then at 24 and 28 under the new step size
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5**4)
    later, again = trainer_for(out, 40, "latest", step_size=4)
    assert again.step_size == 4
    with caplog.at_level(logging.WARNING):
        later.train()
    # checkpoint-30 holds step_size 4: a script that builds it is no change
    assert said(caplog) == []
    assert later.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * 0.5**7)  # 32, 36, 40


def stepped(scheduler: Any, optimizer: torch.optim.Optimizer, steps: int) -> Any:
    for _ in range(steps):
        optimizer.step()
        if isinstance(scheduler, L.ReduceLROnPlateau):
            scheduler.step(1.0)
        else:
            scheduler.step()
    return scheduler


SCHEDULERS: list[tuple[Any, dict[str, Any]]] = [
    (L.StepLR, {"step_size": 3, "gamma": 0.5}),
    (L.CosineAnnealingLR, {"T_max": 10}),
    (L.CosineAnnealingWarmRestarts, {"T_0": 3}),
    (L.OneCycleLR, {"max_lr": 1.0, "total_steps": 20}),
    (L.CyclicLR, {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3}),
    (L.LambdaLR, {"lr_lambda": lambda s: 0.9**s}),
    (L.MultiStepLR, {"milestones": [2, 5]}),
    (L.LinearLR, {}),
    (L.PolynomialLR, {"total_iters": 7}),
    (L.ReduceLROnPlateau, {}),
]


@pytest.mark.parametrize("cls, options", SCHEDULERS, ids=lambda c: getattr(c, "__name__", ""))
def test_what_moves_with_training_is_no_setting(cls: Any, options: dict[str, Any]) -> None:
    """Built afresh and stepped 7 times, the settings are those built: a resume of the
    same script names nothing."""
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1, momentum=0.9)
    scheduler = cls(optimizer, **options)
    built = scheduler_settings(scheduler.state_dict())
    assert built  # something is compared
    assert scheduler_settings(stepped(scheduler, optimizer, 7).state_dict()) == built


def test_a_sequential_schedulers_settings_are_compared_in_each() -> None:
    optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    inner = [L.LinearLR(optimizer, total_iters=4), L.StepLR(optimizer, step_size=3)]
    scheduler = L.SequentialLR(optimizer, inner, milestones=[4])
    settings = scheduler_settings(scheduler.state_dict())
    assert settings["_milestones"] == (4,)
    assert settings["_schedulers[1].step_size"] == 3
    assert settings["_schedulers[0].total_iters"] == 4
    assert scheduler_settings(stepped(scheduler, optimizer, 6).state_dict()) == settings
