"""A study whose training stops at `max_steps`, not at the end of its stream: the
simulations still running then are stopped by the study's stop (killed: pending again,
run again by a resumed run). The final log and the final checkpoint are of the moment
before that stop (the checkpoint lists them to run again), so the final log's
``launcher_running`` counts them; the end-of-run account then says how many were
stopped, and that a resume runs them again, rather than leaving them "running" as the
last word. Before, nothing after the final log said what became of them (the
supervisor's "killing N job(s)" at INFO only, and the account leaves out simulations
that did not end)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: a solver that never ends: back-pressure holds it until the study's stop kills it. (A
#: finite one of 10^5 tiny steps fitted in ZeroMQ's queues: it exited 0 in a few seconds,
#: before a slow or loaded trainer's fifth step, and the final log counted none running.)
SIMULATION = r"""
import itertools, json, os
import numpy as np
from melissa_trainer.client import Client

params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in itertools.count():
        x = np.array([params["a"], params["b"], t / 10], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
"""


class SlowKeys(Keys):
    """`Keys` on a slow (or loaded) trainer: each sample takes `delay` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def __call__(self, s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay)  # (the work of a slow step, not a wait on an event)
        return super().__call__(s)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("delay", [0.0, 1.5], ids=["quick", "slow-trainer"])
def test_simulations_running_at_max_steps_are_said_stopped(tmp_path: Path, delay: float) -> None:
    n = 2
    script = tmp_path / "sim.py"
    script.write_text(SIMULATION)
    launcher = Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        n,
        job_limit=n,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    study = Study(launcher, StreamSource(ReceiverConfig()))
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",
            buffer_size=16,
            watermark=n,  # (both simulations running before the first step)
            max_steps=5,
            logging_steps=1000,  # the final log only
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=1,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=study,
        process_sample=SlowKeys(delay),
    )
    state = trainer.train()
    assert not state.stream_ended and state.global_step == 5
    final = state.log_history[-1]
    running = int(final["source_launcher_running"])
    assert running == n, final  # (the final checkpoint's moment: both to run again)
    saved = tmp_path / "out" / "checkpoints" / "checkpoint-5" / "rank_0" / "source.json"
    assert json.loads(saved.read_text())["launcher"]  # (the record a resume reads)
    # after the study's stop: none running, and the account says what became of them
    assert launcher.summary()["running"] == 0
    said = [line for line in study.account_report if "stopped" in line]
    assert said == [
        f"study: {n} simulations still running when training stopped were stopped "
        "(simulations 0-1): a resumed run runs them again"
    ], study.account_report
