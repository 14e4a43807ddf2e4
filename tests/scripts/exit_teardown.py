"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_exit_teardown.py: a small run whose trainer is held at module level
(as the guide's scripts hold theirs), and what is left of gloo at the interpreter's exit.

Writes OUT/rank_R.json: ``during``, the gloo worker threads after `train()` (torch names
them ``pt_gloo_runloop``: the oracle checks that it sees them), and ``at_exit``, those
left when the last `atexit` handler runs (this script's first: it runs after the
library's teardown, just before the interpreter finalizes, when a worker still alive may
release its last work and abort the process).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments  # noqa: E402


def gloo_workers() -> int:
    """The threads named as torch names gloo's workers (read here, not from the library)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            count += (task / "comm").read_text().strip() == "pt_gloo_runloop"
        except OSError:  # the thread ended meanwhile
            continue
    return count


def main() -> None:
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    out, rank = Path(args.output_dir), int(os.environ["RANK"])
    record: dict[str, int] = {}

    def at_exit() -> None:  # registered first: runs last
        record["at_exit"] = gloo_workers()
        (out / f"rank_{rank}.json").write_text(json.dumps(record))

    atexit.register(at_exit)
    torch.set_num_threads(1)
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    global trainer  # held at module level, as the guide's scripts hold theirs
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=lambda r, w: linear_samples(10**6, seed=r),
        process_sample=xy,
    )
    trainer.train()
    record["during"] = gloo_workers()


if __name__ == "__main__":
    main()
