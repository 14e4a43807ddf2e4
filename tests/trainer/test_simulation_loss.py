"""Per-simulation training losses (`melissa_trainer.core.loss_per_simulation`) and the adaptive
study they steer: the statistic itself, the trainer's tracking (exact against the
model's own losses, resumed bit for bit, errors that name the fix), and a Breed study
in worker mode on two real training ranks."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from held_ports import held_port
from process_tree import run_group

from melissa_trainer import (
    ConfigError,
    Event,
    Hook,
    OnlineTrainer,
    SimulationLoss,
    SimulationLosses,
    SimulationLossTracker,
    Study,
    TrainingArguments,
)
from melissa_trainer.core.loss_per_simulation import REFERENCE_PERIODS
from melissa_trainer.core.loss_steps import DEFAULT_SIMULATION_LOSS_STEPS
from melissa_trainer.launcher import Launcher, make_sampler

CPU = torch.device("cpu")


# -- the statistic ---------------------------------------------------------------------------


def test_a_reduction_sums_each_simulations_losses_and_divides_by_the_recent_mean() -> None:
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([3, 5, 3]), torch.tensor([1.0, 4.0, 3.0]))
    losses.record(np.array([5]), torch.tensor([8.0]))
    assert losses.unreduced == 4
    updated = losses.reduce(step=2)
    period_mean = (1 + 4 + 3 + 8) / 4
    assert updated == {
        3: SimulationLoss(3, 2, 2.0, 2.0 / period_mean, 2),
        5: SimulationLoss(5, 2, 6.0, 6.0 / period_mean, 2),
    }
    assert losses.unreduced == 0 and losses.reduce(step=3) == {}  # nothing new: nothing updated
    losses.record(np.array([3, 7]), torch.tensor([1.0, 3.0]))  # the model got better
    updated = losses.reduce(step=4)
    assert set(updated) == {3, 7}
    # the reference spans this period and the one before: (16 + 1 + 3) / (4 + 2);
    # simulation 3: (1/4 + 3/4 + 1/reference) / 3
    reference = 20 / 6
    assert updated[3].draws == 3 and updated[3].mean == pytest.approx(5.0 / 3)
    assert updated[3].relative == pytest.approx((1 / 4 + 3 / 4 + 1 / reference) / 3)
    assert updated[7].relative == pytest.approx(3 / reference) and updated[7].step == 4
    assert losses.get(5) == SimulationLoss(5, 2, 6.0, 6.0 / period_mean, 2)  # untouched
    assert list(losses) == [3, 5, 7] and len(losses) == 3  # a mapping: ids, in order
    assert [x.simulation_id for x in losses.values()] == [3, 5, 7]
    assert dict(losses.items())[7] == losses[7] == updated[7] and 5 in losses
    assert losses.get(99) is None and 99 not in losses
    with pytest.raises(KeyError, match="99"):
        losses[99]


def test_the_reference_is_the_mean_of_the_last_periods_only() -> None:
    losses = SimulationLosses(CPU, distributed=False)
    for step in range(1, REFERENCE_PERIODS + 1):  # REFERENCE_PERIODS periods of loss 100
        losses.record(np.array([step]), torch.tensor([100.0]))
        losses.reduce(step)
    losses.record(np.array([0]), torch.tensor([1.0]))  # the first period has left: 100 x 3, 1
    expected = 1.0 / ((100.0 * (REFERENCE_PERIODS - 1) + 1.0) / REFERENCE_PERIODS)
    assert losses.reduce(REFERENCE_PERIODS + 1)[0].relative == pytest.approx(expected)


def test_negative_losses_keep_their_order_relative_to_the_reference() -> None:
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([1, 2]), torch.tensor([-3.0, -1.0]))  # reference -2
    updated = losses.reduce(1)
    assert (updated[1].relative, updated[2].relative) == (0.5, 1.5)


def test_all_zero_losses_are_relative_one_and_nan_stays_visible() -> None:
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([1, 2]), torch.zeros(2))
    assert {s: x.relative for s, x in losses.reduce(1).items()} == {1: 1.0, 2: 1.0}
    losses.record(np.array([1]), torch.tensor([float("nan")]))
    assert math.isnan(losses.reduce(2)[1].mean)  # a diverged simulation is not hidden


def test_a_batch_whose_losses_do_not_match_its_samples_is_refused() -> None:
    losses = SimulationLosses(CPU, distributed=False)
    with pytest.raises(ValueError, match=r"one loss per sample.*shape \[3\]"):
        losses.record(np.array([1, 2, 3]), torch.zeros(2))
    with pytest.raises(ValueError, match="one loss per sample"):
        losses.record(np.array([1]), torch.zeros(()))


def test_the_state_holds_the_statistics_and_the_unreduced_samples() -> None:
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([1, 2]), torch.tensor([2.0, 4.0]))
    losses.reduce(1)
    losses.record(np.array([2]), torch.tensor([5.0]))  # not reduced yet
    restored = SimulationLosses(CPU, distributed=False)
    restored.load_state_dict(losses.state_dict())
    assert list(restored) == list(losses) and restored.unreduced == 1
    assert restored.reduce(2) == losses.reduce(2)  # the same period, the same figures


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda s: s.pop("draws"), "lack"),
        (lambda s: s.update(ids=np.array([1, 1])), "id twice"),
        (lambda s: s.update(draws=np.array([-1, 1])), "negative draws"),
        (lambda s: s.update(step=np.array([1])), "different lengths"),
        (lambda s: s.update(unreduced_losses=np.zeros(3)), "unreduced"),
    ],
)
def test_a_corrupt_state_is_refused(edit: Any, match: str) -> None:
    losses = SimulationLosses(CPU, distributed=False)
    losses.record(np.array([1, 2]), torch.tensor([2.0, 4.0]))
    losses.reduce(1)
    state = losses.state_dict()
    edit(state)
    with pytest.raises(ValueError, match=match):
        SimulationLosses(CPU, distributed=False).load_state_dict(state)


# -- the trainer ----------------------------------------------------------------------------

W = np.array([1.0, -2.0, 0.5], np.float32)


def samples(n: int, simulations: int = 4, seed: int = 0) -> Iterator[dict[str, np.ndarray]]:
    """Simulation s's samples: y = (s + 1) * x . W (the larger s, the worse a shared fit)."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        sid = i % simulations
        x = rng.standard_normal(3).astype(np.float32)
        y = np.array([(sid + 1) * (x @ W)], np.float32)
        yield {"x": x, "y": y, "simulation_id": np.array(sid, np.int64)}


def xy(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(sample["x"]), torch.from_numpy(sample["y"])


def make_trainer(
    tmp_path: Path, data: Any, lr: float = 0.05, cls: type = OnlineTrainer, **args: Any
) -> OnlineTrainer:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    options: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "batch_size": 4,
        "buffer": "fifo",  # each sample drawn once: the counts below rely on it
        "buffer_size": 16,
        "report_to": "none",
        "disable_progress_bar": True,
        "simulation_loss_steps": 3,
        "save_at_end": False,
        **args,
    }
    # a process_batch given replaces the default process_sample
    extra = {"process_batch": options.pop("process_batch")} if "process_batch" in options else {}
    return cls(  # type: ignore[no-any-return]
        model,
        TrainingArguments(**options),
        torch.optim.SGD(model.parameters(), lr=lr),
        train_source=data,
        **(extra or {"process_sample": xy}),
    )


class Updates(Hook):
    def __init__(self) -> None:
        self.calls: list[tuple[int, dict[int, SimulationLoss]]] = []

    def on_simulation_losses(self, trainer: Any, state: Any, control: Any, updated: Any) -> None:
        self.calls.append((state.global_step, dict(updated)))


def test_each_simulations_loss_is_the_mean_of_its_samples_losses_when_drawn(
    tmp_path: Path,
) -> None:
    # lr 0: the model never changes, so each sample's loss when drawn is computable here
    data = list(samples(36))
    trainer = make_trainer(tmp_path, iter(data), lr=0.0)
    updates = Updates()
    trainer.hooks.add(updates)
    trainer.train()
    model = trainer.model
    with torch.no_grad():
        per_sample = {
            sid: [
                float(((model(torch.from_numpy(s["x"])) - torch.from_numpy(s["y"])) ** 2).mean())
                for s in data
                if int(s["simulation_id"]) == sid
            ]
            for sid in range(4)
        }
    stats = dict(trainer.simulation_losses)
    assert {s: x.draws for s, x in stats.items()} == {s: 9 for s in range(4)}
    for sid in range(4):
        assert stats[sid].mean == pytest.approx(np.mean(per_sample[sid]), rel=1e-5)
    # every 3 steps (9 steps: at 3, 6 and 9)
    assert [step for step, _ in updates.calls] == [3, 6, 9]
    assert trainer.simulation_losses.unreduced == 0


def test_tracking_trains_as_the_plain_loss_does(tmp_path: Path) -> None:
    plain = make_trainer(tmp_path / "a", samples(64), simulation_loss_steps=0)
    plain.train()
    tracked = make_trainer(tmp_path / "b", samples(64))
    tracked.train()
    assert len(plain.simulation_losses) == 0 and len(tracked.simulation_losses) == 4
    for a, b in zip(plain.model.parameters(), tracked.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)  # the same loss, summed in another order


def test_tracking_trains_bit_for_bit_as_without_it(tmp_path: Path) -> None:
    # issue 46: the per-sample losses come from the step's outputs without autograd, and
    # the step trains on loss_fn(outputs, targets) as it does untracked: the same weights
    # bit for bit (the mean of per-sample means summed the loss in another order, and
    # each step added backward nodes for it)
    rng = np.random.default_rng(3)
    data = [
        {"x": rng.standard_normal(5).astype(np.float32),
         "y": rng.standard_normal(37).astype(np.float32),
         "simulation_id": np.array(i % 6, np.int64)}
        for i in range(96)
    ]  # fmt: skip

    def summed(outputs: torch.Tensor, targets: torch.Tensor, reduction: str = "sum") -> Any:
        return torch.nn.functional.mse_loss(outputs, targets, reduction=reduction)

    def trained(where: Path, steps: int, loss_fn: Any = None) -> list[torch.Tensor]:
        torch.manual_seed(0)
        layers = (torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 37))
        model = torch.nn.Sequential(*layers)
        args = TrainingArguments(output_dir=str(where), batch_size=8, buffer="fifo",
                                 buffer_size=32, report_to="none", disable_progress_bar=True,
                                 simulation_loss_steps=steps, save_at_end=False)  # fmt: skip
        trainer = OnlineTrainer(model, args, torch.optim.Adam(model.parameters(), lr=0.01),
                                train_source=iter(data), process_sample=xy,
                                **({"loss_fn": loss_fn} if loss_fn else {}))  # fmt: skip
        trainer.train()
        assert len(trainer.simulation_losses) == (6 if steps else 0)
        return [p.detach().clone() for p in model.parameters()]

    for a, b in zip(trained(tmp_path / "a", 0), trained(tmp_path / "b", 2), strict=True):
        assert torch.equal(a, b)
    # a loss_fn that sums: tracked, the step still trains on the sum (it trained on the
    # mean of the per-sample means)
    for a, b in zip(trained(tmp_path / "c", 0, summed), trained(tmp_path / "d", 2, summed),
                    strict=True):  # fmt: skip
        assert torch.equal(a, b)


def test_a_resumed_run_reduces_the_same_losses_as_one_never_stopped(tmp_path: Path) -> None:
    # stopped at step 7, between reductions (every 3 steps): the unreduced samples of
    # step 7 are in the checkpoint and the resumed run's period 7-9 includes them; the
    # end of training reduces them after its checkpoint (what is read after train()
    # is complete), which the resume must not see
    whole = make_trainer(tmp_path / "whole", samples(96), max_steps=20)
    whole.train()
    first = make_trainer(tmp_path / "r", samples(96), max_steps=7, save_at_end=True)
    first.train()
    assert first.simulation_losses.unreduced == 0
    assert sum(loss.draws for loss in first.simulation_losses.values()) == 7 * 4
    resumed = make_trainer(
        tmp_path / "r", samples(96), max_steps=20, resume_from_checkpoint="latest"
    )
    resumed.train()
    assert list(resumed.simulation_losses.items()) == list(whole.simulation_losses.items())  # bit


def test_samples_without_simulation_ids_name_the_fix(tmp_path: Path) -> None:
    data = ({"x": s["x"], "y": s["y"]} for s in samples(8))
    with pytest.raises(ValueError, match="'simulation_id' field.*simulation_loss_steps=0"):
        make_trainer(tmp_path, data).train()


def test_a_loss_fn_without_reduction_names_the_fix(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(tmp_path), simulation_loss_steps=2, report_to="none"),
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=samples(8),
        process_sample=xy,
        loss_fn=lambda out, y: ((out - y) ** 2).mean(),
    )
    with pytest.raises(TypeError, match="reduction='none'.*compute_sample_losses"):
        trainer.train()


def test_overriding_compute_loss_alone_is_refused_when_losses_are_tracked(
    tmp_path: Path,
) -> None:
    class L1(OnlineTrainer):
        def compute_loss(self, model: Any, batch: Any) -> torch.Tensor:
            return (model(batch[0]) - batch[1]).abs().mean()

    with pytest.raises(TypeError, match="L1 overrides compute_loss.*compute_sample_losses"):
        make_trainer(tmp_path, samples(8), cls=L1)
    make_trainer(tmp_path, samples(8), cls=L1, simulation_loss_steps=0)  # off: fine

    class L1Samples(L1):
        def compute_sample_losses(self, model: Any, batch: Any) -> torch.Tensor:
            return (model(batch[0]) - batch[1]).abs().mean(dim=1)

    trainer = make_trainer(tmp_path, samples(12), cls=L1Samples)  # 3 steps: one reduction
    trainer.train()
    assert sum(x.draws for x in trainer.simulation_losses.values()) == 12


def test_a_negative_cadence_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="simulation_loss_steps=-1 must be >= 0"):
        TrainingArguments(simulation_loss_steps=-1)


def test_an_adaptive_study_turns_the_losses_on_and_refuses_them_off(tmp_path: Path) -> None:
    def study(kind: str) -> Study:
        bounds = {"a": (0.0, 1.0)}
        sampler = make_sampler(kind, bounds, seed=0)
        return Study(Launcher(["true"], sampler, 4))

    trainer = make_trainer(tmp_path, study("breed"), simulation_loss_steps=None)
    tracker = trainer.hooks.get(SimulationLossTracker)
    assert tracker.steps == DEFAULT_SIMULATION_LOSS_STEPS
    assert trainer.hooks.hooks[0] is tracker  # first: its events precede every other hook's
    fixed = make_trainer(tmp_path, study("lhs"), simulation_loss_steps=None)
    assert fixed.hooks.get(SimulationLossTracker) is None
    assert not fixed.hooks.listens(Event.SAMPLE_LOSSES)  # no per-sample losses computed
    with pytest.raises(ValueError, match="simulation_loss_steps=0.*sampler is adaptive"):
        make_trainer(tmp_path, study("breed"), simulation_loss_steps=0)


# -- an adaptive study on two ranks -----------------------------------------------------------

SCRIPT = Path(__file__).parents[1] / "scripts" / "adaptive_study.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
def test_a_breed_study_in_worker_mode_on_two_ranks_observes_both_ranks_losses(
    tmp_path: Path,
) -> None:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    simulations, steps = 16, 6
    cmd = [
        accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(held_port()), str(SCRIPT),
        "--output_dir", str(out), "--batch_size", "2", "--buffer", "fifo", "--buffer_size", "16",
        "--report_to", "none", "--disable_progress_bar", "--stop_sync_steps", "2",
        "--simulation_loss_steps", "2", "--simulations", str(simulations),
        "--steps", str(steps), "--workers", "2",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    proc = run_group(cmd, timeout=150, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    seen = sorted(tuple(k) for r in ranks for k in r["seen"])
    assert seen == [(s, t) for s in range(simulations) for t in range(steps)]
    # step t of simulation s went to rank (s + t) % 2 (the routing the rendezvous
    # advertises): a simulation's draws count both ranks'
    assert {(s + t) % 2 for s, t in ranks[1]["seen"]} == {1}
    assert ranks[0]["losses"] == ranks[1]["losses"]  # reduced: the same on every rank
    assert ranks[0]["reductions"] == ranks[1]["reductions"] >= 3
    losses = {sid: (draws, mean, relative) for sid, draws, mean, relative, _ in ranks[0]["losses"]}
    assert sorted(losses) == list(range(simulations))
    assert {draws for draws, _, _ in losses.values()} == {steps}
    # the sampler observed each simulation's relative loss, with its own parameters
    rank0 = ranks[0]
    assert len(rank0["observations"]) == simulations
    for sid, parameters, loss in rank0["observations"]:
        assert parameters == rank0["parameters"][str(sid)]
        assert loss == losses[sid][2]
    # and bred some simulations from them (the others explored: a Sobol' sequence)
    assert rank0["position"] == simulations and rank0["explored"] < simulations
    assert rank0["summary"]["finished"] == simulations


@pytest.mark.parametrize("steps", [0, 3])
def test_a_nan_batch_is_named_by_its_simulations_tracked_or_not_ids_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: int
) -> None:
    """The loss guard names the simulations of the batch whose loss is NaN, tracked or
    not; tracked, it takes the batch's ids the dataset read for the per-sample losses
    (issue 46: one read per batch, not two)."""
    import melissa_trainer.core.loss_guard as guard_module
    from melissa_trainer import NonFiniteLossError

    reads: list[int] = []
    read = guard_module.simulation_ids

    def counted(batch: Any) -> np.ndarray:
        reads.append(len(batch))
        return read(batch)

    monkeypatch.setattr(guard_module, "simulation_ids", counted)
    data = list(samples(40, simulations=5))
    data[22]["y"] = np.array([np.nan], np.float32)  # step 6's batch: samples 20-23 (fifo)
    trainer = make_trainer(tmp_path, iter(data), simulation_loss_steps=steps)
    with pytest.raises(NonFiniteLossError) as caught:
        trainer.train()
    assert caught.value.step == 6
    assert caught.value.simulations == sorted({i % 5 for i in range(20, 24)})
    # untracked: the guard reads each batch's ids itself (every step trained, to the check)
    assert reads == ([] if steps else [4] * 10)
