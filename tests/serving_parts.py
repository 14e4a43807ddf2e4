"""The parts shared by the serving studies' tests (tests/trainer/test_serving_study.py,
test_serving_slow_client.py, tests/c/test_c_predict_study.py): simulations that stream
``x`` (3 floats) and ``y = sum(x)`` and ask for the prediction of ``x`` every few steps,
a `Linear(3, 1)` trained on them with a `ServingHook`, and the oracle, independent of
the serving path: a hook that records the model's weights at every version (global
step), against which each answer is recomputed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
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

AskerT = TypeVar("AskerT", bound=Hook)

_SIMULATION = r"""
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
            client.flush()  # (the trainer waits for these to train)
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
"""


def python_simulation(path: Path, steps: int, ask_every: int) -> list[str]:
    """Write the Python simulation to `path` (`steps` steps, a request every `ask_every`
    steps, refusals retried; its answers and refusals in ``$OUT/sim{id}.json``) and
    return the launcher's command for it."""
    text = _SIMULATION.replace("STEPS", str(steps)).replace("ASK_EVERY", str(ask_every))
    path.write_text(text)
    return [sys.executable, str(path)]


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


def linear(weights: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The model of `weights` applied to `x`, in float64 then rounded as the model's."""
    w, b = weights
    return (w.astype(np.float64) @ x.astype(np.float64) + b).astype(np.float32)


def serving_hook(**options: Any) -> ServingHook:
    """The hook that serves ``{"x"}`` with the model's output as ``{"y"}``."""
    return ServingHook(
        {"x": ((3,), "float32")},
        process_inputs=lambda s: torch.from_numpy(s["x"].copy()),
        process_outputs=lambda out: {"y": out},
        **options,
    )


def serving_study(
    tmp_path: Path, command: list[str], simulations: int, hooks: list[Hook]
) -> tuple[OnlineTrainer, Launcher]:
    """A study of `simulations` runs of `command` (``$OUT`` = `tmp_path`, all at once)
    training a seeded `Linear(3, 1)` one sample a step with `hooks`, unstarted."""
    launcher = Launcher(
        command,
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        simulations,
        job_limit=simulations,
        backend=LocalBackend(),
        env={"OUT": str(tmp_path)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
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
        hooks=hooks,
    )
    return trainer, launcher


def train_asking(out: Path, asker: Callable[[ServingHook], AskerT]) -> AskerT:
    """10 steps of a small model on 80 linear samples (tests/helpers.py's), in process,
    with a `ServingHook` of one input ``x`` (3 float32) and the hook ``asker(serving)``
    beside it, which asks that hook: the asker once trained (the in-process serving
    tests: test_serving_in_process_mistakes.py, test_serving_in_process_nonfinite.py)."""
    from helpers import linear_samples, small_model, xy

    serving = ServingHook(
        {"x": ((3,), "float32")}, process_inputs=lambda s: torch.from_numpy(s["x"].copy())
    )
    made = asker(serving)
    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(out), batch_size=8, buffer="fifo"),
        torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(80)),
        process_sample=xy,
        hooks=[serving, made],
    )
    assert trainer.train().global_step == 10
    return made
