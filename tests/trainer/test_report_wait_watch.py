"""The host-waiting collectives outside the stop agreement and the checkpoint's own run
inside the trainer's wait watch (`core.wait_watch`, `StopSync.watch`): a log's all-reduce
of its figures (`trainer.reporting.log`), a validation's all-reduces (eval_loss, the
per-simulation tails) and its gather of the hooks' eval_figures, the wall-clock budget's
agreement, the per-simulation losses' reduction, and the study's account gathered in its
on_save (`study.saved_account`). A rank held in one by another (stopped, hung) warns with
the collective's words instead of waiting silently until the process group's timeout.

One process, whose collectives are fakes (torch.distributed's functions replaced, the
trainer's `StopSync.distributed` set), as tests/trainer/test_checkpoint_wait_watch.py:
each fake records the wait in progress when it ran; one blocks until the warning."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/trainer
from helpers import linear_samples, small_model, xy  # noqa: E402
from wait_said import WAIT, Said  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.core.wait_watch import WaitWatch  # noqa: E402
from melissa_trainer.hooks import Hook  # noqa: E402
from melissa_trainer.hooks.eval_figures import add_eval_figures  # noqa: E402
from melissa_trainer.hooks.loss_tracker import SimulationLossTracker  # noqa: E402
from melissa_trainer.hooks.wall_clock import WallClockBudget  # noqa: E402
from melissa_trainer.study.saved_account import SavedAccount  # noqa: E402


class Figure(Hook):
    """A hook with a validation metric of its own (gathered over ranks)."""

    def eval_figures(self, trainer: Any) -> dict[str, float]:
        return {"figure": 1.0}


def validation() -> list[dict[str, Any]]:
    """Samples of two simulations: the validation has per-simulation tails."""
    return [
        {**s, "simulation_id": np.array(i % 2, np.int64)}
        for i, s in enumerate(linear_samples(8, seed=5))
    ]


def trained(tmp_path: Path) -> OnlineTrainer:
    """A trainer of one process after 2 steps, then made to run its collectives (fakes)."""
    args = TrainingArguments(
        output_dir=str(tmp_path), batch_size=4, buffer="fifo", buffer_size=32, watermark=4,
        max_steps=2, report_to="none", disable_progress_bar=True, save_at_end=False,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(64, seed=rank)),
        process_sample=xy, eval_dataset=validation(), hooks=[Figure()],
    )  # fmt: skip
    trainer.train()
    trainer.stop_sync.distributed = True  # (one rank: each fake leaves its own values)
    return trainer


def fake_collectives(monkeypatch: pytest.MonkeyPatch, on_call: Callable[[str], None]) -> None:
    """torch.distributed's collectives, as fakes of one rank of two (a process group
    "up") that call `on_call` with the collective's name first."""
    dist = torch.distributed

    def gather_object(out: list[Any], obj: Any, *a: Any, **k: Any) -> None:
        on_call("all_gather_object")
        out[:] = [obj] * len(out)

    def reduce(*a: Any, **k: Any) -> None:
        on_call("all_reduce")

    monkeypatch.setattr(dist, "all_gather_object", gather_object)
    monkeypatch.setattr(dist, "all_reduce", reduce)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda *a, **k: 2)
    monkeypatch.setattr(dist, "get_rank", lambda *a, **k: 0)  # (the figures' own slot)


@pytest.mark.timeout(120)
def test_a_log_and_a_validation_run_their_collectives_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer = trained(tmp_path)
    watch = trainer.stop_sync.watch
    calls: list[tuple[str, str | None]] = []
    fake_collectives(monkeypatch, lambda name: calls.append((name, watch._what)))
    trainer.log()
    assert calls and all(c == "all_reduce" for c, _ in calls), calls
    assert all(w and "step 2's log (the all-reduce of its figures)" in w for _, w in calls), calls
    calls.clear()
    metrics = trainer.evaluate()
    assert "eval_loss_p99" in metrics and "eval_figure" in metrics, metrics
    assert [c for c, _ in calls] == ["all_reduce", "all_reduce"], calls
    assert "step 2's validation (the all-reduce of eval_loss)" in str(calls[0][1]), calls
    assert "step 2's validation (the all-reduce of the per-simulation tails)" in str(calls[1][1])
    assert watch._what is None  # (every wait ended)
    calls.clear()  # the hooks' eval_figures, gathered under several processes
    view = SimpleNamespace(num_processes=2, stop_sync=trainer.stop_sync)
    add_eval_figures([Figure()], view, {})  # type: ignore[arg-type]
    assert [c for c, _ in calls] == ["all_gather_object"], calls
    assert "a validation's gather of the hooks' eval_figures" in str(calls[0][1]), calls


@pytest.mark.timeout(60)
def test_the_wall_clock_agreement_and_the_loss_reduction_are_watched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watch = WaitWatch(rank=0)
    trainer = SimpleNamespace(
        num_processes=2,
        accelerator=SimpleNamespace(device=torch.device("cpu")),
        stop_sync=SimpleNamespace(watch=watch, distributed=True),
        optimizer=torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1),
    )
    calls: list[tuple[str, str | None]] = []
    fake_collectives(monkeypatch, lambda name: calls.append((name, watch._what)))
    hook = WallClockBudget(100.0, clock=lambda: 5.0)
    hook._start = 0.0
    hook.on_step_start(trainer, None, None)  # type: ignore[arg-type]  # (the first step)
    assert [c for c, _ in calls] == ["all_reduce"], calls
    assert "WallClockBudget's agreement on the time spent" in str(calls[0][1]), calls
    tracker = SimulationLossTracker(steps=2)
    seen: list[str | None] = []
    monkeypatch.setattr(tracker.losses, "reduce", lambda step: seen.append(watch._what) or {})
    tracker.on_step_end(trainer, SimpleNamespace(global_step=4), None)  # type: ignore[arg-type]
    tracker.on_train_end(trainer, SimpleNamespace(global_step=5), None)  # type: ignore[arg-type]
    assert len(seen) == 2, seen
    assert "step 4's reduction of the per-simulation losses" in str(seen[0]), seen
    assert "step 5's reduction of the per-simulation losses" in str(seen[1]), seen


@pytest.mark.timeout(60)
def test_the_study_account_gather_held_warns_naming_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    watch = WaitWatch(rank=0, first=0.001)
    release = threading.Event()

    def on_call(name: str) -> None:
        assert name == "all_gather_object"
        assert release.wait(WAIT)

    fake_collectives(monkeypatch, on_call)
    account = SavedAccount()
    account.taken({})  # (a receiver not started: [] complete)
    checkpoint = tmp_path / "checkpoint-40"
    thread = threading.Thread(target=account.saved, args=(checkpoint, 1, None, 4, watch))
    thread.start()
    try:
        assert said.warned.wait(WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    first = said.messages[0]
    assert first.startswith("rank 0 has waited"), first
    assert "checkpoint-40's on_save (the study's account of it: an all-gather)" in first, first
    assert "checkpoint files" in first and "kill -CONT PID" in first, first


@pytest.mark.timeout(120)
def test_a_log_held_in_its_all_reduce_warns_with_the_steps_usual_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    trainer = trained(tmp_path)
    trainer.stop_sync.watch = WaitWatch(rank=0, first=0.001)
    release = threading.Event()
    fake_collectives(monkeypatch, lambda name: release.wait(WAIT) and None)
    thread = threading.Thread(target=trainer.log)
    thread.start()
    try:
        assert said.warned.wait(WAIT)
    finally:
        release.set()
        thread.join(WAIT)
    first = said.messages[0]
    assert "the other ranks at step 2's log (the all-reduce of its figures)" in first, first
    assert "still waiting for its data" in first and "running its steps" in first, first
    assert said.messages[-1].startswith("rank 0: the other ranks at step 2's log")


@pytest.mark.timeout(120)
def test_the_loss_check_before_an_action_is_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The action point's first collective is the loss check (`LossGuard.check`): a rank
    held by a late one waits there first, before a log's, a validation's or a save's."""
    trainer = trained(tmp_path)
    trainer._loss_guard.distributed = True  # (its all-reduce: a fake)
    watch = trainer.stop_sync.watch
    calls: list[tuple[str, str | None]] = []
    fake_collectives(monkeypatch, lambda name: calls.append((name, watch._what)))
    trainer.control.should_log = True
    trainer._perform_requested_actions()
    assert len(calls) >= 2 and calls[0][0] == "all_reduce", calls
    check = "step 2's loss check before its log, validation or save (an all-reduce)"
    assert check in str(calls[0][1]), calls
    assert "step 2's log" in str(calls[1][1]), calls
    calls.clear()
    monkeypatch.setattr(
        "melissa_trainer.trainer.checkpointing.save_checkpoint", lambda trainer: None
    )
    trainer.save_checkpoint()
    assert [c for c, _ in calls] == ["all_reduce"], calls
    assert "step 2's loss check before its checkpoint (an all-reduce)" in str(calls[0][1])
