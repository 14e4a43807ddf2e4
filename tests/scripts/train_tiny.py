"""A user's tiny training script, run by tests/trainer/test_device_flags.py with flags
its machine's device cannot run (``--mixed_precision fp16`` on a CPU): parse the flags,
build the model and the trainer (which locks --output_dir), train a few steps."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments  # noqa: E402


def main() -> None:
    (args,) = ArgumentParser(
        TrainingArguments, defaults={"report_to": "none", "disable_progress_bar": True}
    ).parse_args_into_dataclasses()
    print("parsed: building the model", flush=True)
    torch.set_num_threads(1)
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.05),
        train_source=list(linear_samples(64)),
        process_sample=xy,
    )
    trainer.train()


if __name__ == "__main__":
    main()
