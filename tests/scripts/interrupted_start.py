"""Run by tests/checkpoint/test_interrupted_start.py: a trainer that gets SIGINT (what
Ctrl-C sends) before its first step, at one of two points given as argv[1]:

* ``start``: inside its source's `start` (a study launching its simulations);
* ``load``: right after it loaded the checkpoint it resumes (``on_load``: a large
  resume takes seconds).

The signal is sent to this process by itself at that point: deterministic, no timing.
argv[2] is the output directory; ``resume`` as argv[3] resumes from ``latest``. The
source is 400 samples of `linear_samples`, in batches of 8 (50 steps); each step's
samples are appended as their ``x[0]`` values, one line per step, to OUT/steps.log,
so that the test can check that each sample is trained on once across the runs.
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
from melissa_trainer.buffers import Buffer  # noqa: E402
from melissa_trainer.sources.iterable import IterableSource  # noqa: E402

N = 400


class InterruptedAtStart(IterableSource):
    """The in-process source of `linear_samples`, whose `start` gets a SIGINT."""

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        super().start(buffer, rank, world_size)


class Marks(Hook):
    """SIGINT at `on_load` (with ``load``); each step's samples to OUT/steps.log."""

    def __init__(self, point: str, log: Path) -> None:
        self.point, self.log = point, log

    def on_load(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        if self.point == "load":
            os.kill(os.getpid(), signal.SIGINT)

    def on_batch_ready(self, trainer: Any, state: Any, control: Any, batch: Any) -> None:
        with self.log.open("a") as f:
            f.write(" ".join(f"{v:.6f}" for v in batch[0][:, 0].tolist()) + "\n")


def main() -> None:
    point, out = sys.argv[1], Path(sys.argv[2])
    resume = len(sys.argv) > 3 and sys.argv[3] == "resume"
    args = TrainingArguments(
        output_dir=str(out), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, logging_steps=1000, report_to="none", disable_progress_bar=True,
        save_steps=10, max_to_keep=10, resume_from_checkpoint="latest" if resume else None,
    )  # fmt: skip
    samples = list(linear_samples(N))
    source = InterruptedAtStart(samples) if point == "start" else IterableSource(samples)
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2), train_source=source,
        process_sample=xy, hooks=[Marks(point, out / "steps.log")],
    )  # fmt: skip
    trainer.train()


if __name__ == "__main__":
    main()
