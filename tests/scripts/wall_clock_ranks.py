"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/hooks/test_wall_clock.py: trains under a `WallClockBudget` of `--budget` seconds
whose clock runs at a different pace on each rank (rank r: (r + 1) seconds a step, so
the ranks disagree on the time), and writes the rate of every step and the last step
to OUT/rank_R.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import ArgumentParser, Hook, OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.hooks import WallClockBudget  # noqa: E402


class PacedClock(Hook):
    """`pace` seconds a step ended; records the rate each step ran at."""

    def __init__(self, pace: float) -> None:
        self.pace, self.now, self.rates = pace, 0.0, []

    def __call__(self) -> float:
        return self.now

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        self.rates.append(trainer.optimizer.param_groups[0]["lr"])

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.now += self.pace


def main() -> None:
    budget = float(sys.argv.pop(sys.argv.index("--budget") + 1))
    sys.argv.remove("--budget")
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    rank = int(__import__("os").environ.get("RANK", "0"))
    clock = PacedClock(rank + 1.0)
    hook = WallClockBudget(budget, decay_from=0.5, update_steps=4, clock=clock)

    def source(rank: int, world: int):
        return linear_samples(10**6, seed=rank)

    trainer = OnlineTrainer(
        model, args, optimizer, train_source=source, process_sample=xy, hooks=[hook, clock]
    )
    trainer.train()
    result = {"world_size": trainer.num_processes, "global_step": trainer.state.global_step,
              "rates": clock.rates}  # fmt: skip
    out = Path(args.output_dir) / f"rank_{trainer.process_index}.json"
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
