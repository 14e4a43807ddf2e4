"""An adaptive study whose training losses reach its sampler only after its last draw
says so, once, at its end (`melissa_trainer.study.feedback`); one whose losses arrived
in time says nothing of it.

Before: a study that trains fewer than `simulation_loss_steps` steps while it draws (a
FIFO buffer, short simulations, large batches) was drawn by exploration alone, silently:
the user asked for active sampling and got none.

Real studies under an `OnlineTrainer` (simulations started by the local backend,
streaming to the receiver). The oracle is the sampler's own count of its draws: Breed
with ``exploration=0`` explores only while it holds fewer than `min_observations`
losses, and breeds every other draw, so ``explored == position`` says that no draw saw
enough losses, and ``explored < position`` that some did.
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


@pytest.mark.timeout(180)
def test_a_study_whose_losses_arrived_before_its_last_draw_says_nothing_of_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    sampler = BreedSampler({"a": (0.0, 1.0)}, seed=0, exploration=0.0, min_observations=1)
    # one simulation at a time, a reduction every step, a buffer of 2 that blocks the
    # stream: the 5th simulation ends once 8 of its predecessors' samples were taken,
    # so losses were reduced and noted before the 6th (the last) draw
    keys = run_study(tmp_path, sampler, 6, 1, batch_size=1, buffer_size=2, watermark=1,
                     simulation_loss_steps=1)  # fmt: skip
    assert len(keys.seen) == 12
    assert sampler.position == 6 and sampler.explored < 6  # the oracle: some draw bred
    assert not [r for r in caplog.records if STEERED_NONE in r.getMessage()]
    said = accounts(caplog)
    assert len(said) == 1 and said[0].levelno == logging.INFO, [r.getMessage() for r in said]
