"""Run under `accelerate launch` (or plainly, one process) by
tests/trainer/test_first_window.py: trains from an in-process source that fills the
buffer only when the trainer reads (`IterableSource`: its fill depends on the buffer's
state alone), and writes, per rank, the samples put into its buffer when step 1 ended
(`buffer.stats().put`) to OUT/rank_R.json: what training waited for before its first
step, independent of timing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import ArgumentParser, Hook, OnlineTrainer, TrainingArguments  # noqa: E402


class PutAtFirstStep(Hook):
    """Records the samples put into this rank's buffer when each step ends."""

    def __init__(self) -> None:
        self.put: int | None = None
        self.at_step: dict[int, int] = {}

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.at_step[state.global_step] = trainer.buffer.stats().put
        if state.global_step == 1:
            self.put = self.at_step[1]


def main() -> None:
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def source(rank: int, world: int):
        return linear_samples(10**4, seed=rank)

    hook = PutAtFirstStep()
    trainer = OnlineTrainer(
        model, args, optimizer, train_source=source, process_sample=xy, hooks=[hook]
    )
    trainer.train()
    result = {
        "world_size": trainer.num_processes,
        "put_at_step_1": hook.put,
        "put_at_step": hook.at_step,
        "collectives": trainer.stop_sync.collectives,
    }
    out = Path(args.output_dir) / f"rank_{trainer.process_index}.json"
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
