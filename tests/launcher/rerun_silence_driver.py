"""The study of tests/launcher/test_rerun_sign_of_life_e2e.py and
test_rerun_first_send_e2e.py, as the hsolver user trial ran it (/tmp/hsolver_user/train.py,
exp8b.sh): `rerun_silence_solver.py` (or the command ``$RS_COMMAND``, a JSON list) under
a real launcher with a small numeric ``simulation_timeout`` (``$RS_TIMEOUT``) and
``startup_timeout`` ``$RS_STARTUP`` (unset: none, the timeout then bounds the start-up
too), ``max_restarts`` ``$RS_MAX_RESTARTS`` and ``on_failure`` ``$RS_ON_FAILURE`` (unset:
the defaults), one field ``u`` of 4 ``$RS_DTYPE`` (float32 unless set), an MLP, a `SampleLedger`.
TrainingArguments on the command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from melissa_trainer import (
    ArgumentParser,
    Launcher,
    LauncherTuning,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
    make_sampler,
    refusals_end_the_program,
)
from melissa_trainer.hooks import SampleLedger

SOLVER = Path(__file__).with_name("rerun_silence_solver.py")

(args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
settings: dict = (
    {"startup_timeout": float(os.environ["RS_STARTUP"])} if "RS_STARTUP" in os.environ else {}
)
if "RS_MAX_RESTARTS" in os.environ:
    settings["max_restarts"] = int(os.environ["RS_MAX_RESTARTS"])
if "RS_ON_FAILURE" in os.environ:
    settings["on_failure"] = os.environ["RS_ON_FAILURE"]
command = json.loads(os.environ.get("RS_COMMAND", "null")) or [sys.executable, str(SOLVER)]
launcher = Launcher(
    command,
    make_sampler("lhs", {"k": [0.0, 1.0]}, seed=0),
    n_simulations=int(os.environ["RS_SIMULATIONS"]),
    job_limit=2,
    tuning=LauncherTuning(
        simulation_timeout=float(os.environ["RS_TIMEOUT"]), poll_interval=0.05, **settings
    ),
)


def process_sample(s: dict) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.tensor([*s["parameters"], float(s["time_step"])], dtype=torch.float32)
    return x, torch.from_numpy(s["u"].astype("float32")).flatten()  # (C's: uint8)


stream = StreamSource(ReceiverConfig(fields={"u": ((4,), os.environ.get("RS_DTYPE", "float32"))}))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
optimizer = torch.optim.Adam(model.parameters(), 1e-3)
with refusals_end_the_program():
    trainer = OnlineTrainer(
        model, args, optimizer, train_source=Study(launcher, stream),
        process_sample=process_sample, hooks=[SampleLedger()],
    )  # fmt: skip
    trainer.train()
