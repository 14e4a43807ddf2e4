"""Run on two ranks by tests/trainer/test_stopped_rank_watch.py: ``OUT FIRST``, a small
run that saves at step 4 (and at its end, step 6) with the trainer's wait watch's first
bound FIRST seconds (set as the tests set it: `StopSync.watch` replaced).

Rank 1, once it has written its files of the first checkpoint (before the save's
all-gather that follows), writes its pid to ``OUT/held-1`` and waits for ``OUT/go``:
the test stops it there (SIGSTOP), reads rank 0's warning, writes ``go`` and continues
it (SIGCONT). The file, not a sleep, tells the test when rank 1 is at that point. Each
rank writes ``OUT/done-<rank>`` with its last step after `train()`."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.checkpoint import registry  # noqa: E402
from melissa_trainer.core.wait_watch import WaitWatch  # noqa: E402

HOLD = 300.0  # seconds rank 1 waits for the test's ``go`` at most (then it goes on)


def hold_after_first_write(out: Path) -> None:
    """Rank 1: after its first `registry.write`, say so and wait for ``OUT/go``."""
    write = registry.write
    held: list[bool] = []

    def writing(trainer: Any, staging: Path) -> None:
        write(trainer, staging)
        if held:
            return
        held.append(True)
        (out / "held-1.tmp").write_text(str(os.getpid()))
        (out / "held-1.tmp").rename(out / "held-1")  # (whole, when the test reads it)
        deadline = time.monotonic() + HOLD
        while not (out / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    registry.write = writing  # type: ignore[assignment]


def main() -> None:
    out, first = Path(sys.argv[1]), float(sys.argv[2])
    torch.set_num_threads(1)
    args = TrainingArguments(
        output_dir=str(out), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, max_steps=6, save_steps=4, report_to="none",
        disable_progress_bar=True,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: list(linear_samples(400, seed=rank)),
        process_sample=xy,
    )  # fmt: skip
    watch = trainer.stop_sync.watch  # (its roll call kept: the late rank is named)
    trainer.stop_sync.watch = WaitWatch(trainer.process_index, first=first, roll=watch.roll)
    if trainer.process_index == 1:
        out.mkdir(parents=True, exist_ok=True)
        hold_after_first_write(out)
    state = trainer.train()
    (out / f"done-{trainer.process_index}").write_text(str(state.global_step))


if __name__ == "__main__":
    main()
