"""A learning-rate schedule sized in steps (OneCycleLR's total_steps) on a run whose
length follows the stream (trial 29): the run stops at the schedule's end with a
checkpoint and words naming max_steps, not torch's "Tried to step 6 times" with the
work since the last save lost; a max_steps past the schedule is refused before
training; a resume at the schedule's end is refused, and the documented way to train
on with a longer schedule (docs/resume.md, "Schedules sized in steps") works.

In-process source, one rank, a few steps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import melissa_trainer
from melissa_trainer import OnlineTrainer, ScheduleEnded, TrainingArguments
from melissa_trainer.trainer import schedule_end

pytestmark = pytest.mark.timeout(120)


def simulations(rank: int, world_size: int) -> Iterator[dict[str, Any]]:
    for sim in range(rank, 6, world_size):
        for t in range(10):
            field = np.full(16, sim / 6 * t / 10, np.float32)
            yield {"params": np.array([sim / 6], np.float32), "t": t, "field": field}


def process_sample(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.cat([torch.from_numpy(s["params"]), torch.tensor([float(s["t"])])])
    return x, torch.from_numpy(s["field"])


def run(
    out: Path, scheduler_of: Any, max_steps: int | None = None, resume: str | None = None
) -> tuple[OnlineTrainer, Any]:
    """A FIFO run of 15 steps of 4 samples (60 samples), unless max_steps."""
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 16)
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    scheduler = scheduler_of(optimizer)
    args = TrainingArguments(
        output_dir=str(out),
        buffer="fifo",
        batch_size=4,
        logging_steps=5,
        max_steps=max_steps,
        resume_from_checkpoint=resume,
        disable_progress_bar=True,
        report_to="none",
    )
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        scheduler,
        train_source=simulations,
        process_sample=process_sample,
    )
    return trainer, scheduler


def one_cycle(total: int) -> Any:
    return lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1e-2, total_steps=total)


def said(error: BaseException) -> str:
    return str(error) + " ".join(getattr(error, "__notes__", []))


def extended(optimizer: Any, steps: int, scheduler_of: Any) -> Any:
    """docs/resume.md's recipe, word for word: the longer schedule built on a scratch
    optimizer (one group per group of yours; its parameter has no gradient: its steps
    change nothing) and stepped to the checkpoint's step."""
    scratch = torch.optim.SGD([{"params": [torch.zeros(1)]} for _ in optimizer.param_groups])
    longer = scheduler_of(scratch)
    for _ in range(steps):
        scratch.step()
        longer.step()
    return longer


def reference_lrs(scheduler_of: Any, steps: int) -> list[float]:
    """The learning rates of `scheduler_of`'s schedule after `steps` steps, alone."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)])
    scheduler = scheduler_of(optimizer)
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
    return [float(lr) for lr in scheduler.get_last_lr()]


def test_a_run_past_its_schedule_stops_there_with_a_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Failed before: torch's ValueError at step 6, no checkpoint, no word of max_steps."""
    trainer, _ = run(tmp_path / "out", one_cycle(5))
    with caplog.at_level(logging.WARNING), pytest.raises(ScheduleEnded) as raised:
        trainer.train()
    message = said(raised.value)
    assert trainer.state.global_step == 5
    checkpoint = tmp_path / "out" / "checkpoints" / "checkpoint-5"
    assert checkpoint.is_dir()
    assert str(checkpoint) in message, message
    for words in ("OneCycleLR(total_steps=5)", "step 5", "max_steps", "docs/resume.md"):
        assert words in message, message
    # warned before training: max_steps unset under a schedule that ends
    warned = [r.getMessage() for r in caplog.records if "ends at step 5" in r.getMessage()]
    assert len(warned) == 1 and "max_steps is unset" in warned[0], warned


def test_schedule_ended_is_exported_from_the_package_root() -> None:
    """What a script catches (failed before: not in melissa_trainer's namespace)."""
    assert ScheduleEnded is schedule_end.ScheduleEnded
    assert "ScheduleEnded" in melissa_trainer.__all__ and "ScheduleEnded" in dir(melissa_trainer)
    assert issubclass(ScheduleEnded, ValueError)


def test_max_steps_at_the_schedule_end_trains_to_it(tmp_path: Path) -> None:
    trainer, scheduler = run(tmp_path / "out", one_cycle(5), max_steps=5)
    assert trainer.train().global_step == 5
    assert trainer.ended_by == "max_steps 5 reached"
    assert scheduler.last_epoch == 5


def test_max_steps_past_the_schedule_is_refused_before_training(tmp_path: Path) -> None:
    trainer, _ = run(tmp_path / "out", one_cycle(5), max_steps=10)
    with pytest.raises(ScheduleEnded) as raised:
        trainer.train()
    message = str(raised.value)
    assert trainer.state.global_step == 0
    for words in ("max_steps 10", "OneCycleLR(total_steps=5)", "max_steps=5", "total_steps"):
        assert words in message, message
    assert not (tmp_path / "out" / "checkpoints").exists()


def test_a_resume_at_the_schedule_end_is_refused_then_extended_as_documented(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    with pytest.raises(ScheduleEnded, match="the end of the lr_scheduler OneCycleLR"):
        run(out, one_cycle(5))[0].train()
    # the same script resumed: the checkpoint's total (5) applies, no step is left
    trainer, _ = run(out, one_cycle(100), resume="latest")
    with pytest.raises(ScheduleEnded) as raised:
        trainer.train()
    assert "no step left at step 5" in str(raised.value), raised.value
    assert "docs/resume.md" in str(raised.value), raised.value
    # docs/resume.md's way: load by hand, then give the scheduler a longer one's state
    trainer, scheduler = run(out, one_cycle(100), max_steps=12)
    trainer.load_checkpoint(out / "checkpoints" / "checkpoint-5")
    longer = extended(trainer.optimizer, trainer.state.global_step, one_cycle(100))
    scheduler.load_state_dict(longer.state_dict())
    assert trainer.train().global_step == 12
    assert scheduler.last_epoch == 12 and scheduler.total_steps == 100
    assert scheduler.get_last_lr() == pytest.approx(reference_lrs(one_cycle(100), 12))


def lambda_over(rates: list[float]) -> Any:
    """A LambdaLR over a list: its step past the list raises IndexError."""
    return lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda step: rates[step])


def sequential(total: int) -> Any:
    """A OneCycleLR of `total` steps after 2 steps of ConstantLR (its end unreadable)."""

    def make(o: torch.optim.Optimizer) -> Any:
        warm = torch.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=2)
        cycle = torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1e-2, total_steps=total)
        return torch.optim.lr_scheduler.SequentialLR(o, [warm, cycle], milestones=[2])

    return make


def chained(total: int) -> Any:
    def make(o: torch.optim.Optimizer) -> Any:
        cycle = torch.optim.lr_scheduler.OneCycleLR(o, max_lr=1e-2, total_steps=total)
        decay = torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.99)
        return torch.optim.lr_scheduler.ChainedScheduler([cycle, decay], o)

    return make


@pytest.mark.parametrize(
    ("scheduler_of", "name", "raised_at", "cause"),
    [
        (lambda_over([1.0] * 5), "LambdaLR", 5, IndexError),  # rates[5] at its 5th step
        (sequential(5), "SequentialLR", 8, ValueError),  # 2 + OneCycleLR's step 6
        (chained(5), "ChainedScheduler", 6, ValueError),  # OneCycleLR's step 6
    ],
    ids=["LambdaLR", "SequentialLR", "ChainedScheduler"],
)
def test_a_scheduler_raising_at_its_step_stops_there_with_a_checkpoint(
    tmp_path: Path, scheduler_of: Any, name: str, raised_at: int, cause: type
) -> None:
    """A schedule whose end the trainer cannot read, raising at its step mid-run: the
    step (its optimizer update done) counted and checkpointed, a ScheduleEnded naming
    the scheduler, the step, its error and the fix, the scheduler's error as the cause.
    Failed before: the scheduler's own error, no checkpoint (the steps since the last
    save lost: save_steps unset here, nothing at all)."""
    out = tmp_path / "out"
    trainer, _ = run(out, scheduler_of)
    with pytest.raises(ScheduleEnded) as raised:
        trainer.train()
    message = said(raised.value)
    assert isinstance(raised.value.__cause__, cause), repr(raised.value.__cause__)
    assert trainer.state.global_step == raised_at
    checkpoint = out / "checkpoints" / f"checkpoint-{raised_at}"
    assert checkpoint.is_dir(), sorted(p.name for p in out.rglob("checkpoint-*"))
    for words in (name, f"step {raised_at}", cause.__name__, "max_steps", str(checkpoint)):
        assert words in message, (words, message)
    # the checkpoint holds the step: a resume (a longer list) trains on from it
    if name == "LambdaLR":
        trainer, scheduler = run(out, lambda_over([1.0] * 20), resume="latest", max_steps=9)
        assert trainer.train().global_step == 9
        assert scheduler.last_epoch == 9


def test_a_schedule_that_never_raises_runs_to_the_streams_end(tmp_path: Path) -> None:
    """CosineAnnealingLR shorter than the run cycles on: no stop, no error."""

    def cosine(o: torch.optim.Optimizer) -> Any:
        return torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4)

    trainer, scheduler = run(tmp_path / "out", cosine)
    assert trainer.train().global_step == 15
    assert scheduler.last_epoch == 15


@pytest.mark.parametrize(
    ("scheduler_of", "step"),
    [(one_cycle(5), 5), (lambda_over([1.0] * 5), 5)],
    ids=["schedule_ended", "schedule_failed"],
)
def test_the_schedule_end_save_pauses_the_step_watch(
    tmp_path: Path, scheduler_of: Any, step: int
) -> None:
    """The checkpoint at a schedule's end is written inside a window's span of steps
    (`run_waits.run_window`): paused there (`WaitWatch.pause`), as an action point's
    save is, so that a long save is not said to be a step that completes nothing.
    Failed before: written unpaused (0 pauses in progress)."""
    trainer, _ = run(tmp_path / "out", scheduler_of)
    watch, paused = trainer.stop_sync.watch, []
    save = trainer.save_checkpoint

    def spied() -> Path | None:
        paused.append(watch._paused)
        return save()

    trainer.save_checkpoint = spied  # type: ignore[method-assign]
    with pytest.raises(ScheduleEnded, match="training stopped at step 5"):
        trainer.train()
    assert trainer.state.global_step == step
    assert paused == [1] and watch._paused == 0, paused


class Steps(melissa_trainer.Hook):
    """The steps each STEP_END names, and the checkpoint's state of this hook."""

    def __init__(self) -> None:
        self.ended: list[int] = []

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.ended.append(state.global_step)

    def state_dict(self) -> dict[str, Any]:
        return {"ended": list(self.ended)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ended = list(state["ended"])


def test_the_step_a_scheduler_raised_at_fires_step_end_before_its_checkpoint(
    tmp_path: Path,
) -> None:
    """The step whose scheduler raised is trained and counted: its STEP_END fires (as
    under several ranks, where the failure is held) before its checkpoint holds the
    hooks' states. Failed before: the hooks heard steps 1-4 of the 5 trained, and the
    checkpoint held a hook state one step behind the model."""
    out = tmp_path / "out"
    trainer, _ = run(out, lambda_over([1.0] * 5))
    steps = Steps()
    trainer.hooks.add(steps)
    with pytest.raises(ScheduleEnded, match="the lr_scheduler LambdaLR raised at its step 5"):
        trainer.train()
    assert steps.ended == [1, 2, 3, 4, 5]
    trainer, _ = run(out, lambda_over([1.0] * 20), resume="latest", max_steps=7)
    resumed = Steps()
    trainer.hooks.add(resumed)
    trainer.train()
    assert resumed.ended == [1, 2, 3, 4, 5, 6, 7]
