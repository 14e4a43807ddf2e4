"""Run on two ranks by tests/trainer/test_stopped_rank_watch.py: ``OUT FIRST MODE``, a
small run with the trainer's wait watch's first bound FIRST seconds (set as the tests set
it: `StopSync.watch` replaced, its roll call kept).

MODE "save": the run saves at step 4 (and at its end, step 6); rank 1, once it has
written its files of the first checkpoint (before the save's all-gather that follows),
is held. MODE "agreement": no save before the end (step 10); rank 1 is held at the end
of step 4, the last of a window (stop_sync_steps=2), so that rank 0 waits for it in the
stop agreement on the window after next (started before the next window's steps).
MODE "start": as "agreement", but rank 1 is held in its source's start (its factory),
so that rank 0 waits at the barrier once every rank's source started. MODE "steps": as
"agreement", but rank 1 is held at the end of step 3 (the first of a window), so that
rank 0 waits in step 4's backward (DDP's all-reduce, gloo): its span of steps warns.

Held: rank 1 writes its pid to ``OUT/held-1`` and waits for ``OUT/go``: the test stops it
there (SIGSTOP), reads rank 0's warning, writes ``go`` and continues it (SIGCONT). The
file, not a sleep, tells the test when rank 1 is at that point. Each rank writes
``OUT/done-<rank>`` with its last step after `train()`."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.checkpoint import registry  # noqa: E402
from melissa_trainer.core.wait_watch import WaitWatch  # noqa: E402

HOLD = 300.0  # seconds rank 1 waits for the test's ``go`` at most (then it goes on)


def hold(out: Path) -> None:
    """Say where rank 1 is (``OUT/held-1``: its pid) and wait for ``OUT/go``."""
    (out / "held-1.tmp").write_text(str(os.getpid()))
    (out / "held-1.tmp").rename(out / "held-1")  # (whole, when the test reads it)
    deadline = time.monotonic() + HOLD
    while not (out / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def hold_after_first_write(out: Path) -> None:
    """Rank 1: after its first `registry.write`, `hold`."""
    write = registry.write
    held: list[bool] = []

    def writing(trainer: Any, staging: Path) -> None:
        write(trainer, staging)
        if not held:
            held.append(True)
            hold(out)

    registry.write = writing  # type: ignore[assignment]


class HoldAtStep(Hook):
    """Rank 1: `hold` at the end of step `step`."""

    def __init__(self, out: Path, step: int) -> None:
        self.out, self.step = out, step

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if trainer.process_index == 1 and state.global_step == self.step:
            hold(self.out)


def samples(out: Path, mode: str, rank: int) -> list[Any]:
    """The rank's samples (the source's factory, called at its start: rank 1 held there
    in MODE "start")."""
    if mode == "start" and rank == 1:
        hold(out)
    return list(linear_samples(400, seed=rank))


def main() -> None:
    out, first, mode = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    save = mode == "save"
    held = {"agreement": 4, "steps": 3}.get(mode, 0)  # (rank 1 held at the end of that step)
    args = TrainingArguments(
        output_dir=str(out), batch_size=8, buffer="fifo", buffer_size=64, watermark=8,
        stop_sync_steps=2, max_steps=6 if save else 10, save_steps=4 if save else None,
        report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: samples(out, mode, rank), process_sample=xy,
        hooks=[HoldAtStep(out, held)] if held else [],
    )  # fmt: skip
    watch = trainer.stop_sync.watch  # (its roll call kept: the late rank is named)
    trainer.stop_sync.watch = WaitWatch(trainer.process_index, first=first, roll=watch.roll)
    out.mkdir(parents=True, exist_ok=True)
    if trainer.process_index == 1 and save:
        hold_after_first_write(out)
    state = trainer.train()
    (out / f"done-{trainer.process_index}").write_text(str(state.global_step))


if __name__ == "__main__":
    main()
