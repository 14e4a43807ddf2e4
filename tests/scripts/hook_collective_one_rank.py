"""Run on two ranks by tests/hooks/test_hook_collective_one_rank.py: a hook calls
``torch.distributed.all_reduce`` on rank 0 alone, in ``on_step_end`` of step 3 (a
collective that every rank must call, called by one). The process group's timeout is
argv[2] seconds (`InitProcessGroupKwargs`; 0: torch's default). Each rank writes how
its `train()` ended to ``OUT/exit-<rank>.txt`` (a file, not the shared output), when it
ends in Python (an aborted rank writes none).

    python hook_collective_one_rank.py OUT TIMEOUT_S [SIZE]
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import InitProcessGroupKwargs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402

#: the all-reduced tensor's size: 1, smaller than what rank 1's next collective sends,
#: or 1000, larger (which rank's gloo aborts: the one that receives more than it expects)
SIZE = int(sys.argv[3]) if len(sys.argv) > 3 else 1


class OwnCollective(Hook):
    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if trainer.process_index == 0 and state.global_step == 3:
            torch.distributed.all_reduce(torch.ones(SIZE))  # rank 0 alone: the user's bug


def main() -> None:
    out, timeout = sys.argv[1], float(sys.argv[2])
    args = TrainingArguments(
        output_dir=out, batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, report_to="none", disable_progress_bar=True, save_at_end=False,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(4000, seed=rank)),
        process_sample=xy, hooks=[OwnCollective()],
        kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=timeout))]
        if timeout else None,
    )  # fmt: skip
    rank = trainer.process_index
    try:
        trainer.train()
    except BaseException as exc:
        Path(out, f"exit-{rank}.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        raise
    Path(out, f"exit-{rank}.txt").write_text("returned\n")


if __name__ == "__main__":
    main()
