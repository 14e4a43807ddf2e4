"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_sync_count.py: trains `--max_steps` steps with the counting stand-in
of `tests/sync_counter.py` installed and writes, per rank, the host waits it counted
inside each step and between steps to OUT/rank_R.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402
from sync_counter import StepSyncs, SyncCounter  # noqa: E402

from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments  # noqa: E402


def main() -> None:
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def source(rank: int, world: int):
        return linear_samples(10**6, seed=rank)

    counter = SyncCounter()
    steps = StepSyncs(counter)
    trainer = OnlineTrainer(
        model, args, optimizer, train_source=source, process_sample=xy, hooks=[steps]
    )
    counter.watch(trainer)
    with counter:
        trainer.train()
    result = {
        "world_size": trainer.num_processes,
        "global_step": trainer.state.global_step,
        "collectives": trainer.stop_sync.collectives,
        "inside": steps.inside,
        "between": steps.between,
        "stop_reads": steps.stop_reads,
        "calls": counter.calls,
    }
    out = Path(args.output_dir) / f"rank_{trainer.process_index}.json"
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
