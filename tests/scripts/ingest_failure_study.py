"""Run by tests/trainer/test_ingest_transform_study.py, under `python` or `accelerate
launch --multi_gpu --num_processes 2`: a study of real simulations (the test's
SIMULATION, argv[2]) whose ingest transform raises on simulation 0's time step 3.

    python ingest_failure_study.py OUT SIMULATION PIDS

Training must stop with the transform's error (the script exits non-zero) and stop
every simulation it launched (each writes its pid into PIDS)."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import torch

from melissa_trainer import OnlineTrainer, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler


def features(sample: dict[str, Any]) -> dict[str, Any]:
    if int(sample["simulation_id"]) == 0 and int(sample["time_step"]) == 3:
        raise ValueError("no gradient for a field of one point")
    return {"x": sample["x"] * 2, "y": sample["y"]}


def main() -> None:
    out, simulation, pids = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)
    launcher = Launcher(
        [sys.executable, simulation],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        3,
        job_limit=3,
        backend=LocalBackend(),
        env={"SIM_OPTIONS": json.dumps({"pids": pids, "steps": 400})},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=out,
            batch_size=4,
            buffer="reservoir",
            buffer_size=64,
            watermark=8,
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=2,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource()),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        ingest_sample=features,
    )
    trainer.train()
    print("training ended without the transform's error", np.zeros(1))


if __name__ == "__main__":
    main()
