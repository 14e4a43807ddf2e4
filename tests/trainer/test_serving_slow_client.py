"""A slow client and a flood against a real trainer (issue 47's test list): while a study
trains with a `ServingHook` (a small queue, `max_queue=4`), a client process floods the
serving socket with requests and never reads a reply. Held, end to end:

* the flood is refused ``busy`` beyond the queue (back-pressure, not an unbounded
  queue): every one of its requests is counted, answered or refused;
* the other simulations (`Client.predict`, real processes launched by the study) are
  still answered, each with the model of the version it names (the weights recorded at
  every step: the oracle), and may be refused ``busy`` meanwhile, which they retry;
* training is not stalled: every sample is trained on, and the trainer ends (the
  replies the slow client never read are dropped, not waited for).

The same rules against the serving socket alone, to the request, are in
tests/stream/test_serving.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from melissa_trainer import (
    Hook,
    OnlineTrainer,
    ServingHook,
    StreamSource,
    Study,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SIMULATIONS, STEPS, ASK_EVERY, FLOOD = 2, 40, 10, 3000

SIMULATION = r"""
import json, os, time
import numpy as np
from melissa_trainer.client import Client, PredictRefused

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
answers, refusals = [], []
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(STEPS):
        x = np.array([params["a"], params["b"], t / 100], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
        if t % ASK_EVERY == ASK_EVERY - 1:
            client.flush()
            for attempt in range(400):
                try:
                    out, version = client.predict({"x": x}, timeout=30)
                except PredictRefused as exc:  # not_serving before training; busy
                    refusals.append(exc.reason)
                    time.sleep(0.05)
                    continue
                answers.append({"x": x.tolist(), "y": out["y"].tolist(), "version": version})
                break
with open(os.path.join(os.environ["OUT"], f"sim{sid}.json"), "w") as f:
    json.dump({"answers": answers, "refusals": refusals}, f)
""".replace("STEPS", str(STEPS)).replace("ASK_EVERY", str(ASK_EVERY))

SLOW = r"""
import os, sys
import numpy as np
import zmq
from melissa_trainer import wire as protocol

ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.SNDHWM, 0)
sock.setsockopt(zmq.RCVHWM, 1)  # (it reads nothing: the trainer's replies pile up there)
sock.connect(os.environ["ENDPOINT"])
x = np.ones(3, np.float32)
for i in range(int(os.environ["N"])):
    sock.send_multipart(protocol.encode_predict(99, i, 0, None, {"x": x}))
print("sent", flush=True)
sys.stdin.read()  # never reads a reply; killed by the test
"""


class Weights(Hook):
    """The model's weights at each version (global step), read after the optimizer step."""

    def __init__(self) -> None:
        self.by_version: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _record(self, trainer: Any, state: TrainerState) -> None:
        model = trainer.accelerator.unwrap_model(trainer.model)
        self.by_version[state.global_step] = (
            model.weight.detach().numpy().copy(),
            model.bias.detach().numpy().copy(),
        )

    def on_train_start(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self._record(trainer, state)

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self._record(trainer, state)


class SlowClient(Hook):
    """At step 2, starts the slow client and holds the training thread until the
    serving socket has read its whole flood (so the flood meets a served queue)."""

    def __init__(self, serving: ServingHook, script: Path) -> None:
        self.serving, self.script = serving, script
        self.proc: subprocess.Popen[str] | None = None

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step != 2:
            return
        before = self.serving.telemetry().get("requests", 0)
        env = {**os.environ, "ENDPOINT": self.serving.endpoint or "", "N": str(FLOOD)}
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "sent"
        while self.serving.telemetry().get("requests", 0) < before + FLOOD:  # (sims ask too)
            assert self.proc.poll() is None
            threading.Event().wait(0.01)


def linear(weights: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    w, b = weights
    return (w.astype(np.float64) @ x.astype(np.float64) + b).astype(np.float32)


@pytest.mark.timeout(240)
def test_a_flooding_client_that_reads_nothing_stalls_neither_training_nor_the_others(
    tmp_path: Path,
) -> None:
    script = tmp_path / "sim.py"
    script.write_text(SIMULATION)
    slow_script = tmp_path / "slow.py"
    slow_script.write_text(SLOW)
    launcher = Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        SIMULATIONS,
        job_limit=SIMULATIONS,
        backend=LocalBackend(),
        env={"OUT": str(tmp_path)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    serving = ServingHook(
        {"x": ((3,), "float32")},
        process_inputs=lambda s: torch.from_numpy(s["x"].copy()),
        process_outputs=lambda out: {"y": out},
        max_queue=4,
    )
    weights = Weights()
    slow = SlowClient(serving, slow_script)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",
            buffer_size=64,
            watermark=1,
            logging_steps=1000,
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=1,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=Study(launcher, StreamSource()),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        hooks=[weights, serving, slow],
    )
    try:
        state = trainer.train()
        assert slow.proc is not None and slow.proc.poll() is None  # it never read, still there
    finally:
        if slow.proc is not None:
            slow.proc.kill()
            slow.proc.wait()
    assert state.global_step == SIMULATIONS * STEPS  # training not stalled: every sample

    sims_answered, sims_busy = 0, 0
    for sid in range(SIMULATIONS):
        record = json.loads((tmp_path / f"sim{sid}.json").read_text())
        assert len(record["answers"]) == STEPS // ASK_EVERY  # the others still answered
        assert set(record["refusals"]) <= {"not_serving", "busy"}
        for answer in record["answers"]:
            expected = linear(weights.by_version[answer["version"]], np.array(answer["x"]))
            np.testing.assert_allclose(answer["y"], expected, rtol=1e-5, atol=1e-6)
        sims_answered += len(record["answers"])
        sims_busy += record["refusals"].count("busy")

    counts = serving.telemetry()
    flood_busy = counts.get("refused_busy", 0) - sims_busy
    flood_answered = counts["answered"] - sims_answered
    assert flood_busy > 0  # back-pressure: refused, not queued without bound
    # every request of the flood was counted once: answered (its replies dropped unread),
    # refused busy, or expired (none has a timeout: none expires)
    assert flood_answered + flood_busy == FLOOD, counts
    assert counts.get("expired", 0) == 0
