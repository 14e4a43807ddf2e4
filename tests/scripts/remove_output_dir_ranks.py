"""Run on two ranks by tests/checkpoint/test_output_dir_removed_ranks.py: a user's
``rm -rf`` of the output directory while both ranks train. At the end of step 3 rank 0
removes OUTPUT_DIR (before the step's log, an action point: logging_steps=1), then both
ranks train on. Each rank writes the exception that ends it, its class and exit status,
to ``RECORDS/exit-<rank>.txt`` (outside OUTPUT_DIR, which is gone); "training ended" is
printed only if `train()` returned.

    python remove_output_dir_ranks.py OUTPUT_DIR RECORDS
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402

out, records = Path(sys.argv[1]), Path(sys.argv[2])


class RemoveOnRankZero(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if trainer.process_index == 0 and state.global_step == 3:
            shutil.rmtree(out)


def main() -> None:
    args = TrainingArguments(
        output_dir=str(out), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, disable_progress_bar=True, logging_steps=1, save_steps=5,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(4000, seed=rank)),
        process_sample=xy, hooks=[RemoveOnRankZero()],
    )  # fmt: skip
    trainer.train()
    print("training ended", flush=True)


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:
        said = f"{type(exc).__name__} {getattr(exc, 'code', 1)}\n"
        (records / f"exit-{os.environ.get('RANK', '0')}.txt").write_text(said)
        raise
