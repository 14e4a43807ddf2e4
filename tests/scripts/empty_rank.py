"""Run on two ranks by tests/trainer/test_no_training.py: rank 0's source yields 2
samples, rank 1's none (as a study of fewer simulations than ranks leaves one: a simulation
time step 0 to rank 0). Each rank writes how `train()` ended, the exception's class or
"returned", to ``OUT/exit-<rank>.txt`` (a file, not the shared output).

    python empty_rank.py OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402
from rank_study import recording_end  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1])
    torch.set_num_threads(1)
    args = TrainingArguments(
        output_dir=str(out), report_to="none", disable_progress_bar=True, batch_size=1,
        buffer="fifo", buffer_size=8, stop_sync_steps=1,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(2 if rank == 0 else 0),
        process_sample=xy,
    )  # fmt: skip
    rank = trainer.process_index

    def write(ended: str) -> None:
        (out.parent / f"exit-{rank}.txt").write_text(f"{ended} {trainer.state.global_step}\n")

    with recording_end(write):
        trainer.train()


if __name__ == "__main__":
    main()
