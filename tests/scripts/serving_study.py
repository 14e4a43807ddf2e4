"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_serving_study.py: a study of simulations that ask the trainer for
predictions (its SIMULATION script, given as argv[2]), served by a `ServingHook` on
each rank. Each rank writes OUT/rank_R.json: the model's weights at every version, its
serving counters, the serving figures of its last log, and the serve files it saw
published (at TRAIN_START, after a barrier: both ranks have bound)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


class Record(Hook):
    def __init__(self) -> None:
        self.weights: dict[int, list[list[float]]] = {}
        self.serve_files: list[dict[str, Any]] = []

    def _weights(self, trainer: Any, state: TrainerState) -> None:
        model = trainer.accelerator.unwrap_model(trainer.model)
        self.weights[state.global_step] = [
            model.weight.detach().reshape(-1).tolist(),
            model.bias.detach().reshape(-1).tolist(),
        ]

    def on_train_start(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        trainer.accelerator.wait_for_everyone()  # (every rank has bound and published)
        rendezvous = Path(trainer.args.output_dir) / "rendezvous"
        self.serve_files = [json.loads(p.read_text()) for p in sorted(rendezvous.glob("serve_*"))]
        self._weights(trainer, state)

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        self._weights(trainer, state)


def main() -> None:
    out, simulation, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    launcher = Launcher(
        [sys.executable, simulation],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        n,
        job_limit=n,
        backend=LocalBackend(),
        env={"OUT": str(out)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    serving = ServingHook(
        {"x": ((3,), "float32")},
        process_inputs=lambda s: torch.from_numpy(s["x"].copy()),
        process_outputs=lambda y: {"y": y},
    )
    record = Record()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(out / "run"),
            batch_size=1,
            buffer="fifo",
            buffer_size=64,
            logging_steps=1000,
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=1,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=Study(launcher, StreamSource()),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        hooks=[record, serving],
    )
    state = trainer.train()
    rank = trainer.process_index
    result = {
        "rank": rank,
        "world_size": trainer.num_processes,
        "global_step": state.global_step,
        "weights": record.weights,
        "serve_files": record.serve_files,
        "telemetry": serving.telemetry(),
        # the last log's serving figures (reduced over the ranks by the trainer)
        "logged": next(
            {k: v for k, v in entry.items() if k.startswith("serving_")}
            for entry in reversed(state.log_history)
            if "serving_requests" in entry
        ),
    }
    (out / f"rank_{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
