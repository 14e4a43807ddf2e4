"""Run by tests/trainer/test_starved_hook_collective.py under ``accelerate launch
--multi_gpu --num_processes 2`` (gloo on CPU): rank 1 starves in a window taken ahead
(after its first windows) while rank 0 holds its batches and ends up held (the
deadlock's state), with a user's collective in a hook on every rank: an all-reduce in
``on_step_start``, whose result it reads (``.item()``).

Simulation 0 sends rank 1 its 16 samples (time steps 1, 3, ..., 31 of simulation 0 go
to rank 1 under the routing ``(s + t) % 2``), every other simulation one time step to
rank 0 (as starved_rank.py's). FIFO buffers of 8 samples, batch_size 4 and
``stop_sync_steps=2``: the windows are step 0, step 1, then steps 2-3, whose agreement
takes the next window's batches first (steps 4-5: reads 5 and 6); rank 1's four
batches end there, rank 0 fills and is held back.

    python starved_rank_hook_collective.py OUT SOLVER N

Each rank writes ``OUT/../exit-<rank>.json``, as starved_rank.py's, and
``OUT/../hook-<rank>.json``: the hook's all-reduces that completed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rank_study import study_trainer
from starved_rank import process, train_recording_exit

from melissa_trainer import Hook, ReceiverConfig

#: simulation 0: 16 time steps to rank 1; any other: one time step to rank 0
SOLVER = r"""
import numpy as np
from melissa_trainer.client import Client

with Client({"x": ((2,), "f4")}) as c:
    x = np.array([c.parameters["a"], 0.0], np.float32)
    if c.simulation_id == 0:  # time step t goes to rank (0 + t) % 2: 1
        for i in range(16):
            c.send(1 + 2 * i, x=x)
    else:  # (s + s % 2) % 2 = 0
        c.send(c.simulation_id % 2, x=x)
"""


class AllReduceOnStepStart(Hook):
    """A user's collective in a hook, on every rank: the step's mean of a figure."""

    def __init__(self) -> None:
        self.done = 0

    def on_step_start(self, trainer: Any, state: Any, control: Any) -> None:
        figure = torch.ones(1)
        dist.all_reduce(figure)
        assert figure.item() == 2.0
        self.done += 1


def main() -> None:
    out, solver, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    parameters = [{"a": float(i)} for i in range(n)]
    trainer = study_trainer(
        out, solver, parameters, 2, ReceiverConfig(stall_timeout=600), process,
        batch_size=4, buffer="fifo", buffer_size=8, stop_sync_steps=2,
    )  # fmt: skip
    hook = AllReduceOnStepStart()
    trainer.hooks.add(hook)
    try:
        train_recording_exit(trainer, out)
    finally:
        done = {"done": hook.done}
        (Path(out).parent / f"hook-{trainer.process_index}.json").write_text(json.dumps(done))


if __name__ == "__main__":
    main()
