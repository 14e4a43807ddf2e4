"""Run on two ranks by tests/trainer/test_schedule_end_ranks.py: a OneCycleLR of 5
steps, max_steps unset, a stream of 50 steps per rank, stop_sync_steps 2 (the stop at
step 5 falls inside a window, with the next one's agreement started). Each rank writes
``<error type> <global_step>`` to ``OUTPUT_DIR/ended_<rank>.txt`` (its own file: the
ranks share one stdout) and exits 1 when `train()` raised, as an uncaught error would.
With ``sequential`` as second argument, the OneCycleLR runs inside a SequentialLR after
2 steps of ConstantLR (its end unreadable: the scheduler raises at step 8, after that
step's optimizer update). With ``one_rank``, a LambdaLR whose lambda raises an OSError on
rank 1 only, at its step 4 (a rank-local failure: a user's lambda that reads a file);
with ``one_rank_last``, the same with max_steps 6 (no agreement left in the loop after
step 4's window: the one after the loop carries it).
With ``unequal``, the OneCycleLR is 5 steps on rank 0 and 7 on rank 1 (a total counted
per rank). Each rank also writes its error's message to ``OUTPUT_DIR/said_<rank>.txt``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402


def rank_local(epoch: int) -> float:
    """1.0, but an OSError on rank 1 at epoch 4 (the scheduler's step 4)."""
    if os.environ.get("RANK") == "1" and epoch == 4:
        raise OSError("rank-local failure in the user's scheduler")
    return 1.0


def main() -> None:
    args = TrainingArguments(
        output_dir=sys.argv[1], batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, report_to="none", disable_progress_bar=True,
        max_steps=6 if sys.argv[2:] == ["one_rank_last"] else None,
    )  # fmt: skip
    model = small_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    total = 7 if sys.argv[2:] == ["unequal"] and os.environ.get("RANK") == "1" else 5
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=total)
    if sys.argv[2:] == ["sequential"]:
        warm = torch.optim.lr_scheduler.ConstantLR(optimizer, factor=0.5, total_iters=2)
        scheduler = torch.optim.lr_scheduler.SequentialLR(
            optimizer, [warm, scheduler], milestones=[2]
        )
    if sys.argv[2:] in (["one_rank"], ["one_rank_last"]):
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rank_local)
    trainer = OnlineTrainer(
        model, args, optimizer, scheduler,
        train_source=lambda rank, world: list(linear_samples(400, seed=rank)),
        process_sample=xy,
    )  # fmt: skip
    ended = Path(sys.argv[1]) / f"ended_{trainer.process_index}.txt"
    try:
        trainer.train()
    except Exception as exc:
        ended.write_text(f"{type(exc).__name__} {trainer.state.global_step}\n")
        (ended.parent / f"said_{trainer.process_index}.txt").write_text(str(exc))
        raise
    ended.write_text(f"none {trainer.state.global_step}\n")


if __name__ == "__main__":
    main()
