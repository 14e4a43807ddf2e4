"""``last_window_signal.py`` with ``save_steps=4``: ``last_window_signal_save_steps.py
OUTPUT_DIR``. The run of 4 steps still has ``save_at_end`` off, but its last step is a
``save_steps`` step, so a checkpoint of its end (checkpoint-4) is written as it ends.
The hook holds `on_step_end` of step 4 (before that save) for the test's signal."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import linear_samples, small_model, xy  # noqa: E402
from last_window_signal import HoldAtLastStep  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    torch.set_num_threads(1)
    model = small_model(0)
    args = TrainingArguments(
        output_dir=str(out), max_steps=4, stop_sync_steps=8, save_at_end=False,
        save_steps=4, report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.05),
        train_source=list(linear_samples(64)),
        process_sample=xy,
        hooks=[HoldAtLastStep(out.parent)],
    )
    trainer.train()
    print("script end", flush=True)


if __name__ == "__main__":
    main()
