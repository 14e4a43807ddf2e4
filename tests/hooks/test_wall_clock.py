"""`WallClockBudget` on a real `OnlineTrainer`: the rate it sets at each step, from a
clock the test drives (one second a step: deterministic), the stop at the budget, a
resume that goes on from the checkpoint's seconds, and its refusals."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from held_ports import held_port
from helpers import linear_samples, small_model, xy
from process_tree import run_group

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments
from melissa_trainer.hooks.wall_clock import WallClockBudget, budget_factor

LR = 1e-2
SCRIPT = Path(__file__).parents[1] / "scripts" / "wall_clock_ranks.py"


class StepClock(Hook):
    """A clock that reads the steps ended (a step: one second), and the rate each step
    ran at, read from the optimizer after the budget's hook set it."""

    def __init__(self, start: float = 0.0) -> None:
        self.now, self.rates = start, []

    def __call__(self) -> float:
        return self.now

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        self.rates.append(trainer.optimizer.param_groups[0]["lr"])

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.now += 1.0


def trainer_with(tmp_path: Path, hooks: list[Hook], n: int = 4000, **overrides: Any):
    args = TrainingArguments(
        **{
            "output_dir": str(tmp_path / "out"),
            "batch_size": 8,
            "buffer": "fifo",
            "buffer_size": 64,
            "logging_steps": 10**6,
            "save_at_end": False,
            "stop_sync_steps": 4,
            "report_to": "none",
            "disable_progress_bar": True,
            **overrides,
        }  # fmt: skip
    )
    model = small_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    return OnlineTrainer(model, args, optimizer, train_source=list(linear_samples(n)),
                         process_sample=xy, hooks=hooks)  # fmt: skip


def expected_rates(steps: int, seconds: float, decay_from: float, every: int) -> list[float]:
    """The oracle: step k (0-based) ran at the rate of the progress read at the last
    update, the clock then reading the steps ended."""
    return [LR * budget_factor((k - k % every) / seconds, decay_from) for k in range(steps)]


def test_the_factor_holds_then_decays_along_a_half_cosine() -> None:
    assert budget_factor(0.0) == 1.0 and budget_factor(1.0) == pytest.approx(0.0)
    assert budget_factor(0.5) == pytest.approx(0.5)  # the plain cosine's midpoint
    assert budget_factor(0.3, 0.6) == budget_factor(0.6, 0.6) == 1.0  # held
    assert budget_factor(0.8, 0.6) == pytest.approx(0.5)  # halfway through the decay
    assert budget_factor(1.5, 0.6) == 0.0 and budget_factor(-1.0, 0.6) == 1.0
    for bad in (-0.1, 1.0, math.nan):
        with pytest.raises(ValueError, match="decay_from"):
            budget_factor(0.5, bad)


def test_the_rate_follows_the_clock_and_training_stops_at_the_budget(tmp_path: Path) -> None:
    clock = StepClock()
    budget = WallClockBudget(100, decay_from=0.6, update_steps=5, clock=clock)
    trainer = trainer_with(tmp_path, [budget, clock])
    state = trainer.train()
    # the stop request at step 100's start (progress 1) takes effect at the next stop
    # synchronisation (every 4 steps): the steps up to 104, all at rate 0 after 100
    assert 100 < state.global_step <= 104
    assert clock.rates == pytest.approx(expected_rates(state.global_step, 100, 0.6, 5))
    assert clock.rates[:60] == [LR] * 60 and clock.rates[100:] == [0.0] * (state.global_step - 100)
    assert 0 < clock.rates[80] < LR
    # the end-of-run line says why it stopped (it said "end of training" as at max_steps)
    assert trainer.ended_by == "stopped by a hook, WallClockBudget: its 100 s are spent"


def test_a_resume_goes_on_from_the_checkpoints_seconds(tmp_path: Path) -> None:
    clock = StepClock()
    first = WallClockBudget(100, decay_from=0.5, update_steps=1, clock=clock)
    trainer_with(tmp_path, [first, clock], max_steps=40, save_at_end=True).train()
    assert first.state_dict() == {"elapsed": 40.0}
    # a new process: its clock starts anywhere; the budget's 40 s spent are restored
    again = StepClock(start=1000.0)
    second = WallClockBudget(100, decay_from=0.5, update_steps=1, clock=again)
    checkpoint = sorted((tmp_path / "out" / "checkpoints").glob("checkpoint-*"))[-1]
    resumed = trainer_with(tmp_path, [second, again], resume_from_checkpoint=str(checkpoint))
    state = resumed.train()
    assert 100 < state.global_step <= 104  # 60 more seconds, not 100
    assert again.rates == pytest.approx(expected_rates(state.global_step, 100, 0.5, 1)[40:])


def test_bad_arguments_and_a_scheduler_beside_it_are_refused(tmp_path: Path) -> None:
    for bad in (0, -1, math.inf, "60"):
        with pytest.raises(ValueError, match="seconds"):
            WallClockBudget(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="decay_from"):
        WallClockBudget(60, decay_from=1.0)
    with pytest.raises(ValueError, match="update_steps"):
        WallClockBudget(60, update_steps=0)
    model = small_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    args = TrainingArguments(output_dir=str(tmp_path / "s"), batch_size=8, buffer="fifo",
                             buffer_size=64, save_at_end=False, report_to="none",
                             disable_progress_bar=True)  # fmt: skip
    trainer = OnlineTrainer(
        model, args, optimizer, train_source=list(linear_samples(64)), process_sample=xy,
        lr_scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),
        hooks=[WallClockBudget(60)],
    )  # fmt: skip
    with pytest.raises(ValueError, match="no lr_scheduler"):
        trainer.train()


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_ranks_whose_clocks_disagree_run_at_the_same_rates_and_stop_together(
    tmp_path: Path,
) -> None:
    """Two ranks (gloo), rank 1's clock twice as fast as rank 0's: both take the
    faster's time (the largest elapsed) at each update, so the rates are the same at
    every step (the oracle: rank 1's pace, 2 s a step) and both stop at the same step."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    out = tmp_path / "out"
    out.mkdir()
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--main_process_port", str(held_port())]
    cmd += [str(SCRIPT), "--budget", "100", "--output_dir", str(out), "--batch_size", "8"]
    cmd += ["--buffer", "fifo", "--buffer_size", "64", "--report_to", "none"]
    cmd += ["--disable_progress_bar", "--stop_sync_steps", "4", "--save_at_end", "false"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])}
    env["CUDA_VISIBLE_DEVICES"] = ""  # gloo on CPU on any machine
    proc = run_group(cmd, timeout=200, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((out / f"rank_{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    steps = ranks[0]["global_step"]
    # the update at step 52 reads rank 1's 104 s: the stop, asked for then, is agreed
    # within three windows of 4 steps (one started after the flag, and its read)
    assert ranks[1]["global_step"] == steps and 52 < steps <= 64
    oracle = [0.01 * budget_factor(2.0 * (k - k % 4) / 100, 0.5) for k in range(steps)]
    assert ranks[0]["rates"] == ranks[1]["rates"] == pytest.approx(oracle)
