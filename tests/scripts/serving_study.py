"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_serving_study.py: a study of simulations that ask the trainer for
predictions (its SIMULATION script, given as argv[2]), served by a `ServingHook` on
each rank: the study, the hook and the weights oracle of tests/serving_parts.py. Each
rank writes OUT/rank_R.json: the model's weights at every version, its serving
counters, the serving figures of its last log, and the serve files it saw published
(at TRAIN_START, after a barrier: both ranks have bound)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from serving_parts import Weights, serving_hook, serving_study  # noqa: E402

from melissa_trainer import TrainerControl, TrainerState  # noqa: E402


class Record(Weights):
    """The weights at every version, and the serve files every rank published."""

    def __init__(self) -> None:
        super().__init__()
        self.serve_files: list[dict[str, Any]] = []

    def on_train_start(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        trainer.accelerator.wait_for_everyone()  # (every rank has bound and published)
        rendezvous = Path(trainer.args.output_dir) / "rendezvous"
        self.serve_files = [json.loads(p.read_text()) for p in sorted(rendezvous.glob("serve_*"))]
        super().on_train_start(trainer, state, control)


def main() -> None:
    out, simulation, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    serving, record = serving_hook(), Record()
    trainer, _ = serving_study(out, [sys.executable, simulation], n, [record, serving])
    state = trainer.train()
    rank = trainer.process_index
    result = {
        "rank": rank,
        "world_size": trainer.num_processes,
        "global_step": state.global_step,
        "weights": {
            version: [w.reshape(-1).tolist(), b.reshape(-1).tolist()]
            for version, (w, b) in record.by_version.items()
        },
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
