"""The per-sample losses as an event (SAMPLE_LOSSES), the `SimulationLossTracker` hook
built on it, and the source's lifecycle as events (issue 32, item 3).

The trainer knows nothing of simulations: a user hook that overrides
`on_sample_losses` gets each micro-batch's per-sample losses; the tracker is such a
hook, and its statistics are checked against an oracle written here from the
`simulation_loss` module docstring (per-simulation sums of losses the oracle computes
itself, from the model before each forward pass, and the reference of the last
`REFERENCE_PERIODS` periods)."""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from melissa_trainer import (
    Event,
    Hook,
    HookList,
    OnlineTrainer,
    SimulationLossTracker,
    Study,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from melissa_trainer.core.loss_per_simulation import REFERENCE_PERIODS
from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.study.hooks import AdaptiveFeed, StudyEvents

W = np.array([1.0, -2.0, 0.5], np.float32)


def samples(n: int, simulations: int = 4, ids: bool = True) -> Iterator[dict[str, np.ndarray]]:
    """Simulation s's samples: y = (s + 1) * x . W."""
    rng = np.random.default_rng(0)
    for i in range(n):
        sid = i % simulations
        x = rng.standard_normal(3).astype(np.float32)
        sample = {"x": x, "y": np.array([(sid + 1) * (x @ W)], np.float32)}
        if ids:
            sample["simulation_id"] = np.array(sid, np.int64)
        yield sample


def xy(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(sample["x"]), torch.from_numpy(sample["y"])


def make_trainer(
    tmp_path: Path, data: Any, hooks: list[Hook], cls: type = OnlineTrainer, **args: Any
) -> Any:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    options: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "batch_size": 4,
        "buffer": "fifo",
        "buffer_size": 16,
        "report_to": "none",
        "disable_progress_bar": True,
        "save_at_end": False,
        "simulation_loss_steps": 0,
        **args,
    }
    return cls(
        model,
        TrainingArguments(**options),
        torch.optim.SGD(model.parameters(), lr=0.05),
        train_source=data,
        process_sample=xy,
        hooks=hooks,
    )


class SampleLosses(Hook):
    """A user hook that asks for the per-sample losses (by overriding the event)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[float], list[int] | None]] = []

    def on_sample_losses(
        self, trainer: Any, state: Any, control: Any, losses: torch.Tensor, ids: Any
    ) -> None:
        self.calls.append(
            (state.global_step, losses.tolist(), None if ids is None else ids.tolist())
        )


class OwnLosses(Hook):
    """The oracle's per-sample losses: computed here, in BATCH_READY (before the
    forward pass, so with the same weights), with the samples' simulation ids read from
    the raw samples (`trainer.dataset.last_samples`); and the reductions seen."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[int], list[float]]] = []  # (step, ids, losses)
        self.reductions: list[tuple[int, dict[int, Any]]] = []

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        with torch.no_grad():
            out = trainer.model(batch[0])
            losses = ((out.double() - batch[1].double()) ** 2).mean(dim=1)
        ids = [int(s["simulation_id"]) for s in trainer.dataset.last_samples]
        self.batches.append((state.global_step + 1, ids, losses.tolist()))

    def on_simulation_losses(self, trainer: Any, state: Any, control: Any, updated: Any) -> None:
        self.reductions.append((state.global_step, dict(updated)))


class CountingTrainer(OnlineTrainer):
    """Counts its `compute_loss` and `compute_sample_losses` calls (overriding both, as
    a trainer with its own loss must when a hook asks for the per-sample losses)."""

    calls: dict[str, int] = {}

    def compute_loss(self, model: Any, batch: Any) -> torch.Tensor:
        self.calls["loss"] = self.calls.get("loss", 0) + 1
        return torch.nn.functional.mse_loss(model(batch[0]), batch[1])

    def compute_sample_losses(self, model: Any, batch: Any) -> torch.Tensor:
        self.calls["samples"] = self.calls.get("samples", 0) + 1
        return super().compute_sample_losses(model, batch)


@pytest.mark.timeout(120)
def test_a_user_hook_gets_the_per_sample_losses_only_when_it_asks(tmp_path: Path) -> None:
    untracked = make_trainer(tmp_path / "a", samples(24), [], cls=CountingTrainer)
    untracked.calls = {}
    untracked.train()
    assert untracked.calls == {"loss": 6}  # nobody listens: compute_loss, no event
    hook = SampleLosses()
    trainer = make_trainer(tmp_path / "b", samples(24), [hook], cls=CountingTrainer)
    trainer.calls = {}
    trainer.train()
    assert trainer.calls == {"samples": 6} and len(hook.calls) == 6
    assert [step for step, _, _ in hook.calls] == [0, 1, 2, 3, 4, 5]  # before the update
    assert all(len(losses) == 4 for _, losses, _ in hook.calls)
    assert [ids for _, _, ids in hook.calls] == [[0, 1, 2, 3]] * 6
    assert len(trainer.simulation_losses) == 0  # no tracker: no statistic
    # samples without simulation ids: the losses, and None for the ids (no error)
    plain = SampleLosses()
    make_trainer(tmp_path / "c", samples(8, ids=False), [plain]).train()
    assert [ids for _, _, ids in plain.calls] == [None, None]


@pytest.mark.timeout(120)
def test_a_tracker_given_as_a_user_hook_tracks_with_the_cadence_off(tmp_path: Path) -> None:
    tracker = SimulationLossTracker(2)
    trainer = make_trainer(tmp_path, samples(16), [tracker], simulation_loss_steps=0)
    assert trainer.hooks.get(SimulationLossTracker) is tracker  # not a second one
    trainer.train()
    assert trainer.simulation_losses is tracker.losses
    assert {sid: x.draws for sid, x in tracker.losses.items()} == {s: 4 for s in range(4)}
    assert tracker.losses.reductions == 2


def _oracle(
    batches: list[tuple[int, list[int], list[float]]], cadence: int, last: int | None = None
) -> dict[int, tuple[int, float, float, int]]:
    """Per simulation (draws, mean, relative, step of its last reduction), from the
    module docstring of `simulation_loss`: reductions every `cadence` steps (and at the
    run's `last` step, the end of training), each sample's relative loss
    1 + (l - r) / |r| with r the mean of every finite sample loss of its period and the
    REFERENCE_PERIODS - 1 before it."""
    periods: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for step, ids, losses in batches:
        end = math.ceil(step / cadence) * cadence
        end = end if last is None else min(end, last)
        periods[end] += list(zip(ids, losses, strict=True))
    recent: deque[tuple[float, int]] = deque(maxlen=REFERENCE_PERIODS)
    draws: dict[int, int] = defaultdict(int)
    sums: dict[int, float] = defaultdict(float)
    relative: dict[int, float] = defaultdict(float)
    last: dict[int, int] = {}
    for end in sorted(periods):
        period = periods[end]
        recent.append((sum(loss for _, loss in period), len(period)))
        r = sum(s for s, _ in recent) / sum(n for _, n in recent)
        for sid, loss in period:
            draws[sid] += 1
            sums[sid] += loss
            relative[sid] += 1 + (loss - r) / abs(r)
            last[sid] = end
    return {s: (draws[s], sums[s] / draws[s], relative[s] / draws[s], last[s]) for s in draws}


@pytest.mark.timeout(120)
def test_the_tracker_matches_an_oracle_over_a_whole_run(tmp_path: Path) -> None:
    # 3 steps per reduction, 2 micro-batches per step: 120 samples = 30 batches = 15
    # steps, 5 reductions (more than REFERENCE_PERIODS: the reference window slides);
    # the model trains (lr > 0), so each loss is taken when its sample was drawn
    own = OwnLosses()
    trainer = make_trainer(tmp_path, samples(120, simulations=5), [own],
                           simulation_loss_steps=3, gradient_accumulation_steps=2)  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 15
    assert [step for step, _ in own.reductions] == [3, 6, 9, 12, 15]
    expected = _oracle(own.batches, cadence=3)
    got = dict(trainer.simulation_losses)
    assert sorted(got) == sorted(expected) == list(range(5))
    for sid, (draws, mean, relative, step) in expected.items():
        assert got[sid].draws == draws == 24
        assert got[sid].mean == pytest.approx(mean, rel=1e-5)
        assert got[sid].relative == pytest.approx(relative, rel=1e-5)
        assert got[sid].step == step
    assert own.reductions[-1][1] == {sid: got[sid] for sid in own.reductions[-1][1]}


@pytest.mark.timeout(120)
def test_what_is_read_after_train_holds_every_sample_trained_on(tmp_path: Path) -> None:
    """15 steps with a reduction every 4: the steps after the last one (13-15) are
    reduced at the end of training, not left out of what is read after `train()` (they
    were, up to `simulation_loss_steps` - 1 steps of them). The oracles: the oracle's
    statistics with a last period ending at step 15; every sample trained on counted."""
    own = OwnLosses()
    trainer = make_trainer(tmp_path, samples(120, simulations=5), [own],
                           simulation_loss_steps=4, gradient_accumulation_steps=2)  # fmt: skip
    state = trainer.train()
    assert state.global_step == 15
    assert [step for step, _ in own.reductions] == [4, 8, 12, 15]
    got = dict(trainer.simulation_losses)
    assert sum(loss.draws for loss in got.values()) == state.total_samples_seen == 120
    expected = _oracle(own.batches, cadence=4, last=15)
    assert sorted(got) == sorted(expected) == list(range(5))
    for sid, (draws, mean, relative, step) in expected.items():
        assert got[sid].draws == draws == 24
        assert got[sid].mean == pytest.approx(mean, rel=1e-5)
        assert got[sid].relative == pytest.approx(relative, rel=1e-5)
        assert got[sid].step == step == 15


class Recorded(Study):
    """A study whose lifecycle calls are recorded, not acted on."""

    def __init__(self, kind: str) -> None:
        super().__init__(Launcher(["true"], make_sampler(kind, {"a": (0.0, 1.0)}, seed=0), 4))
        self.calls: list[str] = []

    def on_all_ranks_started(self) -> None:
        self.calls.append("started")

    def on_end_of_stream(self) -> None:
        self.calls.append("end_of_stream")

    def on_preempted(self) -> None:
        self.calls.append("preempted")

    def observe_simulation_losses(self, updated: Any) -> None:
        self.calls.append(f"observe:{sorted(updated)}")


def test_a_study_hears_of_the_run_through_its_hooks() -> None:
    args = TrainingArguments(output_dir="unused", report_to="none")
    fixed = Recorded("lhs")
    assert [type(h) for h in fixed.hooks(args)] == [StudyEvents]
    adaptive = Recorded("breed")
    hooks = HookList(adaptive.hooks(args))
    assert [type(h) for h in hooks.hooks] == [SimulationLossTracker, AdaptiveFeed, StudyEvents]
    state, control = TrainerState(), TrainerControl()
    for event in (Event.SOURCE_STARTED, Event.END_OF_STREAM, Event.PREEMPTED):
        hooks.fire(event, None, state, control)
    hooks.fire(Event.SIMULATION_LOSSES, None, state, control, {3: None, 1: None})
    assert adaptive.calls == ["started", "end_of_stream", "preempted", "observe:[1, 3]"]
    with pytest.raises(ValueError, match="simulation_loss_steps=0.*sampler is adaptive"):
        adaptive.hooks(TrainingArguments(output_dir="unused", simulation_loss_steps=0))


class Order(Hook):
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_source_started(self, trainer: Any, state: Any, control: Any) -> None:
        self.events.append("source_started")

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        self.events.append("train_start")


def test_a_user_hook_sees_the_source_start_before_training_starts(tmp_path: Path) -> None:
    order = Order()
    make_trainer(tmp_path, samples(8), [order]).train()
    assert order.events == ["source_started", "train_start"]


@pytest.mark.timeout(120)
def test_a_checkpoint_with_or_without_a_tracker_resumes_with_or_without_one(
    tmp_path: Path,
) -> None:
    """Every checkpoint has the per-simulation losses' file (an empty record without a
    tracker), so the tracker may come or go between a run and its resume."""
    untracked = make_trainer(tmp_path / "a", samples(48), [], max_steps=4, save_at_end=True)
    untracked.train()
    record = tmp_path / "a" / "out" / "checkpoints" / "checkpoint-4" / "rank_0"
    assert (record / "simulation_losses.safetensors").is_file()
    resumed = make_trainer(tmp_path / "a", samples(48), [], simulation_loss_steps=2,
                           resume_from_checkpoint="latest")  # fmt: skip
    resumed.train()  # steps 5 to 12: reductions at 6, 8, 10, 12 of the samples drawn since
    assert {sid: x.draws for sid, x in resumed.simulation_losses.items()} == {
        s: 8 for s in range(4)
    }
    tracked = make_trainer(tmp_path / "b", samples(48), [], simulation_loss_steps=2,
                           max_steps=4, save_at_end=True)  # fmt: skip
    tracked.train()
    assert len(tracked.simulation_losses) == 4
    again = make_trainer(tmp_path / "b", samples(48), [], resume_from_checkpoint="latest")
    again.train()  # no tracker: the record is not read, and training goes on
    assert again.state.global_step == 12 and len(again.simulation_losses) == 0
