"""Run by tests/trainer/test_starved_slow_hook.py under ``accelerate launch --multi_gpu
--num_processes 2`` (gloo on CPU): starved_rank.py's study (every sample goes to rank
0, rank 1 starves, rank 0's launcher ends up held: the deadlock's state), with a slow
hook on rank 0 alone, as a user's ``on_train_start`` that plots or uploads on the main
process only: it writes ``OUT/../in-hook`` and waits until ``OUT/../release`` exists
(the test creates it once it has seen rank 1 not fail while rank 0 was in its hook).

    python starved_rank_slow_hook.py OUT SOLVER N

Each rank writes ``OUT/../exit-<rank>.json``, as starved_rank.py's.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch
from rank_study import study_trainer
from starved_rank import (
    SOLVER,  # noqa: F401 (the test reads it from this module)
    process,
    train_recording_exit,
)

from melissa_trainer import Hook, ReceiverConfig

#: seconds the hook waits for the release at most (the test's own timeout is shorter)
RELEASE_WAIT = 300.0


class SlowOnMainProcess(Hook):
    """Waits for the test's release file in ``on_train_start`` (rank 0 only)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        (self.folder / "in-hook").write_text("")
        deadline = time.monotonic() + RELEASE_WAIT
        while not (self.folder / "release").exists():  # (the event: the test's file)
            if time.monotonic() > deadline:
                raise TimeoutError("the test never released rank 0's slow hook")
            time.sleep(0.05)


def main() -> None:
    out, solver, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)

    parameters = [{"a": float(i), "t": float(i % 2), "follow": 0.0} for i in range(n)]
    trainer = study_trainer(
        out, solver, parameters, 2, ReceiverConfig(stall_timeout=600), process, batch_size=4
    )
    if trainer.process_index == 0:
        trainer.hooks.add(SlowOnMainProcess(Path(out).parent))
    train_recording_exit(trainer, out)


if __name__ == "__main__":
    main()
