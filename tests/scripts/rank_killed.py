"""Run on two ranks by tests/trainer/test_rank_killed_said.py: rank VICTIM SIGKILLs
itself (as ``kill -9`` or the OOM killer would) in its hook's ``on_save`` of the first
checkpoint, ``checkpoint-4``: once that checkpoint is complete, before any other step.
The other rank trains on and finds it gone at its next collective.

Each rank's stderr goes to ``OUT/stderr-<rank>.txt`` (fd 2 itself: its log lines, and
any traceback Python prints, whatever prints them), and the exception that ends a rank,
its class and exit status, to ``OUT/exit-<rank>.txt``; "training ended" is printed
only if `train()` returned.

    python rank_killed.py OUT VICTIM
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

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402

OUT = Path(sys.argv[1])
VICTIM = int(sys.argv[2])
RANK = int(os.environ.get("RANK", "0"))


class KillAtFirstSave(Hook):
    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        if RANK == VICTIM:
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    args = TrainingArguments(
        output_dir=str(OUT), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, report_to="none", disable_progress_bar=True, save_steps=4,
        max_steps=400,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(4000, seed=rank)),
        process_sample=xy, hooks=[KillAtFirstSave()],
    )  # fmt: skip
    trainer.train()
    print("training ended", flush=True)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"stderr-{RANK}.txt").open("w") as err:
        os.dup2(err.fileno(), 2)  # (Python's traceback at exit goes there too)
    try:
        main()
    except BaseException as exc:
        said = f"{type(exc).__name__} {getattr(exc, 'code', 1)}\n"
        (OUT / f"exit-{RANK}.txt").write_text(said)
        raise
