"""The hooks page's order (docs/how-to/hooks.md, "The contract", **Order**): the source's
hooks first (a `Study`'s), then the `SimulationLossTracker` that
`--simulation_loss_steps` asks for, then the built-in hooks, then the user's in the
order given; per event only the hooks that override it are called. (The source's own
order and the tracker's place were tested; the user's hooks after the built-in ones, in
their order, and the per-event calls were not.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import (
    Hook,
    OnlineTrainer,
    SimulationLossTracker,
    Study,
    TrainingArguments,
)
from melissa_trainer.hooks.events import Event
from melissa_trainer.hooks.flow import FlowHook
from melissa_trainer.hooks.progress import ProgressHook
from melissa_trainer.hooks.tensorboard import TensorBoardHook
from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.study.hooks import StudyEvents

pytestmark = pytest.mark.timeout(120)


class Mine(Hook):
    """Appends its tag to `calls` at every step's end."""

    def __init__(self, tag: str, calls: list[str]) -> None:
        self.tag, self.calls = tag, calls

    @property
    def name(self) -> str:
        return f"Mine-{self.tag}"

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.calls.append(self.tag)


class Quiet(Hook):
    """Overrides no event."""


def trainer(out: Path, source: Any, hooks: list[Hook], **over: Any) -> OnlineTrainer:
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=8,
        buffer="fifo",
        buffer_size=64,
        watermark=1,
        save_at_end=False,
        disable_progress_bar=True,
        **over,
    )
    model = small_model(0)
    return OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=source,
        process_sample=xy,
        hooks=hooks,
    )


def test_the_sources_hooks_then_the_tracker_then_the_built_in_then_the_users(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    study = Study(Launcher(["true"], make_sampler("lhs", {"a": (0.0, 1.0)}, seed=0), 4))
    users = [Mine("b", calls), Quiet(), Mine("a", calls)]
    run = trainer(tmp_path / "out", study, users, simulation_loss_steps=3, report_to="tensorboard")
    kinds = [type(h) for h in run.hooks.hooks]
    assert kinds == [
        StudyEvents,  # the source's
        SimulationLossTracker,  # what --simulation_loss_steps asks for
        FlowHook,  # the built-in ones
        ProgressHook,
        TensorBoardHook,
        Mine,  # the user's, in the order given
        Quiet,
        Mine,
    ]
    assert run.hooks.hooks[-3:] == users


def test_per_event_only_the_hooks_that_override_it_are_called_in_order(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    users = [Mine("b", calls), Quiet(), Mine("a", calls)]
    run = trainer(
        tmp_path / "out", list(linear_samples(40, 0)), users, max_steps=3, report_to="none"
    )
    # (HookList keeps the listeners per event; no public view lists them)
    listeners = [m.__self__ for m in run.hooks._listeners[Event.STEP_END]]
    assert [h for h in listeners if h in users] == [users[0], users[2]]  # not Quiet
    run.train()
    assert calls == ["b", "a"] * 3
