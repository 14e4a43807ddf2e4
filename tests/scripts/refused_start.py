"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_refused_start.py: a trainer whose start is refused (an earlier run's
checkpoints in --output_dir). Each rank that catches the refusal as a `ConfigError`
writes OUT/caught_R.json (its class and whether it is a SystemExit), then lets it go
uncaught, as a user's script would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import ArgumentParser, ConfigError, OnlineTrainer, TrainingArguments  # noqa: E402


def main() -> None:
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.05),
        train_source=lambda rank, world: linear_samples(64, seed=rank),
        process_sample=xy,
    )
    try:
        trainer.train()
    except ConfigError as exc:
        caught = {"class": type(exc).__name__, "system_exit": isinstance(exc, SystemExit)}
        out = Path(args.output_dir) / f"caught_{trainer.process_index}.json"
        out.write_text(json.dumps(caught))
        raise


if __name__ == "__main__":
    main()
