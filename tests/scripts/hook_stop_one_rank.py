"""Run on two ranks by tests/hooks/test_end_reason.py: a hook on rank 1 alone sets
`control.should_stop` at step 5; each rank writes ``<step> <ended_by>`` to
``OUTPUT_DIR/ended_<rank>.txt`` after `train()` (a file, not the shared stdout, where two
ranks' lines can interleave mid-line). Rank 0 prints the end-of-run line (the progress
hook's)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402


class StopOnRankOne(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if trainer.process_index == 1 and state.global_step >= 5:
            control.should_stop = True


def main() -> None:
    args = TrainingArguments(
        output_dir=sys.argv[1], batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, report_to="none", disable_progress_bar=True, save_at_end=False,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(400, seed=rank)),
        process_sample=xy, hooks=[StopOnRankOne()],
    )  # fmt: skip
    state = trainer.train()
    ended = Path(sys.argv[1]) / f"ended_{trainer.process_index}.txt"
    ended.write_text(f"{state.global_step} {trainer.ended_by}\n")


if __name__ == "__main__":
    main()
