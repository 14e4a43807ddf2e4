"""An adaptive study whose training losses reach its sampler only after its last draw
says so, once, at its end (`melissa_trainer.study.feedback`); one where they reached it
for its last few draws only (fewer than half of those its size let adapt) says that;
one whose losses arrived in time for most draws says nothing of it.

Before: a study that trains fewer than `simulation_loss_steps` steps while it draws (a
FIFO buffer, short simulations, large batches) was drawn by exploration alone, silently:
the user asked for active sampling and got none; and one whose losses arrived for its
last draws only was not told either.

Real studies under an `OnlineTrainer` (simulations started by the local backend,
streaming to the receiver). The oracle is the sampler's own count of its draws: Breed
with ``exploration=0`` explores only while it holds fewer than `min_observations`
losses, and breeds every other draw, so ``explored == position`` says that no draw saw
enough losses, and ``position - explored`` is how many did (the adaptive draws).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend
from melissa_trainer.launcher.breed import BreedSampler

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SOLVER = r"""
import numpy as np
from melissa_trainer.client import Client

with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    a = client.parameters["a"]
    for t in range(2):
        client.send(t, x=np.array([a, t, 1.0], np.float32), y=np.array([a * a], np.float32))
"""
STEERED_NONE = "the adaptive sampler steered none of its draws"


def run_study(tmp_path: Path, sampler: BreedSampler, n: int, job_limit: int, **args: Any) -> Keys:
    """Train on a study of `n` simulations (two time steps each) drawn by `sampler`."""
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(script)],
        sampler,
        n,
        job_limit=job_limit,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    keys = Keys()
    options: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "buffer": "fifo",
        "logging_steps": 100,
        "disable_progress_bar": True,
        "report_to": "none",
        "save_at_end": False,
        **args,
    }
    OnlineTrainer(
        model,
        TrainingArguments(**options),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=keys,
    ).train()
    return keys


def accounts(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage().startswith("study account")]


@pytest.mark.timeout(180)
def test_a_study_that_drew_everything_before_any_loss_arrived_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    sampler = BreedSampler({"a": (0.0, 1.0)}, seed=0, exploration=0.0)  # min_observations 8
    # 10 simulations x 2 steps in batches of 4: 5 steps, fewer than one reduction's 20
    keys = run_study(tmp_path, sampler, 10, 4, batch_size=4, buffer_size=32,
                     simulation_loss_steps=20)  # fmt: skip
    assert len(keys.seen) == 20
    # the oracle: every draw explored, and the losses all arrived, after the last draw
    assert sampler.position == 10 and sampler.explored == 10
    assert len(sampler.observations) == 10
    said = [r for r in caplog.records if STEERED_NONE in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said == accounts(caplog)  # in the study's account, which it makes a WARNING
    assert said[0].levelno == logging.WARNING
    line = next(x for x in said[0].getMessage().splitlines() if STEERED_NONE in x)
    assert "of 10 draws, 0 adaptive and 10 exploratory" in line, line
    assert "held the training losses of 0 simulations" in line, line
    assert "from 8 on (min_observations)" in line, line
    assert "every 20 training steps (simulation_loss_steps)" in line, line
    assert "Lower simulation_loss_steps" in line and "sample_to_insert_ratio" in line, line


FEW = "the adaptive sampler steered few of its draws"


def sequential_study(tmp_path: Path, loss_steps: int) -> BreedSampler:
    """16 simulations one at a time (job_limit 1), each 2 steps, trained one sample a
    step from a buffer of 2 that blocks the stream: a simulation ends once nearly all
    its predecessors' samples were trained on, so draw j comes after about 2j - 4 steps
    or more, 2j at most. Breed adapts from one loss on (`min_observations` 1): 15 of
    the 16 draws could adapt, the first 7.5 of them is `FEW_SHARE`."""
    sampler = BreedSampler({"a": (0.0, 1.0)}, seed=0, exploration=0.0, min_observations=1)
    keys = run_study(tmp_path, sampler, 16, 1, batch_size=1, buffer_size=2, watermark=1,
                     simulation_loss_steps=loss_steps)  # fmt: skip
    assert len(keys.seen) == 32 and sampler.position == 16
    assert sampler.adaptive_draws == sampler.position - sampler.explored  # (the oracle's)
    return sampler


@pytest.mark.timeout(180)
def test_a_study_whose_losses_arrived_before_most_draws_says_nothing_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    # a reduction every step: draw j held the losses of the simulations trained before
    sampler = sequential_study(tmp_path, loss_steps=1)
    assert sampler.position - sampler.explored >= 8  # the oracle: at least half adapted
    assert not [
        r for r in caplog.records if STEERED_NONE in r.getMessage() or FEW in r.getMessage()
    ]
    said = accounts(caplog)
    assert len(said) == 1 and said[0].levelno == logging.INFO, [r.getMessage() for r in said]


@pytest.mark.timeout(180)
def test_a_study_whose_losses_arrived_for_its_last_draws_only_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    # the first reduction at step 20, of 32: after draw 10 at the earliest (2j >= 20),
    # by draw 15 at the latest (its predecessor's samples 28-29 wait on step 26 or so)
    sampler = sequential_study(tmp_path, loss_steps=20)
    bred = sampler.position - sampler.explored
    assert 0 < bred < 7.5, bred  # the oracle: some adapted, fewer than half of 15
    said = [r for r in caplog.records if FEW in r.getMessage()]
    assert len(said) == 1 and said == accounts(caplog), [r.getMessage() for r in said]
    assert said[0].levelno == logging.WARNING
    assert STEERED_NONE not in said[0].getMessage()
    line = next(x for x in said[0].getMessage().splitlines() if FEW in x)
    assert f"of 16 draws, {bred} adaptive" in line and f"{16 - bred} exploratory" in line, line
    assert "where 15 could have adapted" in line, line
    assert "every 20 training steps (simulation_loss_steps)" in line, line
    assert "Lower simulation_loss_steps" in line and "job_limit" in line, line
