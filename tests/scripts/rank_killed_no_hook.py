"""Run on two ranks by tests/hooks/test_rank_gone_named.py: rank 1 SIGKILLs itself (as
``kill -9`` or the OOM killer would) in its loss function at step 3, in no hook method
(the script has no hook of its own: no rank's hook mark is ever set). Rank 0 finds it
gone at its next collective.

Each rank writes how its `train()` ended to ``OUT/exit-<rank>.txt`` when it ends in
Python (the killed rank writes none), and rank 1 its pid to ``OUT/pid-1.txt`` first.

    python rank_killed_no_hook.py OUT
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402

OUT = Path(sys.argv[1])
RANK = int(os.environ.get("RANK", "0"))
calls = 0


def loss_fn(outputs: Any, targets: Any) -> Any:
    """Mean squared error; on rank 1, its third call (step 3's) kills the rank."""
    global calls
    calls += 1
    if RANK == 1 and calls == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return torch.nn.functional.mse_loss(outputs, targets)


def main() -> None:
    args = TrainingArguments(
        output_dir=str(OUT), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, report_to="none", disable_progress_bar=True, save_at_end=False,
        max_steps=400,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(4000, seed=rank)),
        process_sample=xy, loss_fn=loss_fn,
    )  # fmt: skip
    try:
        trainer.train()
    except BaseException as exc:
        (OUT / f"exit-{RANK}.txt").write_text(f"{type(exc).__name__}: {exc}\n")
        raise
    (OUT / f"exit-{RANK}.txt").write_text("returned\n")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"pid-{RANK}.txt").write_text(f"{os.getpid()}\n")
    main()
