"""Run by tests/trainer/test_starved_rank.py under ``accelerate launch --multi_gpu
--num_processes 2`` (gloo on CPU): a study whose every sample goes to rank 0, so that
rank 1 starves while rank 0 is held back by it (the hang of a user trial, 2026-12-01).

N simulations of one time step each; simulation s sends its step as time step
``s % 2``, which the client routes to rank ``(s + s % 2) % 2 = 0`` (a steady-state
solver that numbers its one output by, say, its iteration count). Two run at a time;
the default reservoir, batch_size 4: rank 1 never gets a sample, rank 0 draws its
window's batches and waits for rank 1 in the step agreement, its reservoir's rate
limiter then holds its inserts back, the two running simulations wait on that
back-pressure and the launcher starts no more. Before the starvation watch
(`melissa_trainer.study.starvation`) nothing ended this (rank 1's stall watchdog
excused its silence as the launcher's start-up allowance, 600 s).

    python starved_rank.py OUT SOLVER N STALL_TIMEOUT [FOLLOW]

With FOLLOW 1, a simulation that starts while rank 0's launcher has raised its bound
for the starved rank (``lifted`` in rank 0's ``study_progress.json``) sends that rank
16 time steps instead (as a simulation of many time steps would, under the routing):
the one the raised bound starts can feed it (tests/trainer/test_starved_rank.py).

Each rank writes ``OUT/../exit-<rank>.json``: how `train()` ended (the exception's
class or "returned") and the steps trained.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from rank_study import recording_end, study_trainer

from melissa_trainer import ReceiverConfig

#: one time step, numbered by the parameter "t", of x = (a, 0); with the parameter
#: "follow" 1 and rank 0's bound raised for a starved rank, 16 steps to rank 1 instead
SOLVER = r"""
import json, os
import numpy as np
from melissa_trainer.client import Client

lifted = False
if json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"]).get("follow"):
    try:
        progress = os.path.join(os.environ["MELISSA_TRAINER_RENDEZVOUS"], "study_progress.json")
        lifted = bool(json.load(open(progress)).get("lifted"))
    except (OSError, ValueError):
        pass
with Client({"x": ((2,), "f4")}) as c:
    x = np.array([c.parameters["a"], 0.0], np.float32)
    if lifted:  # time step t goes to rank (s + t) % 2: 1
        for i in range(16):
            c.send((c.simulation_id + 1) % 2 + 2 * i, x=x)
    else:
        c.send(int(c.parameters["t"]), x=x)
"""


def process(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """A sample's ``x = (a, 0)`` as (input a, target 0)."""
    return torch.from_numpy(s["x"][:1]), torch.from_numpy(s["x"][1:])


def train_recording_exit(trainer: Any, out: str) -> None:
    """Train `trainer`; this rank then writes ``OUT/../exit-<rank>.json`` (`out` is
    OUT): how `train()` ended (the exception's class or "returned", `recording_end`)
    and the steps trained. Shared by the starved_rank*.py scripts."""

    def write(ended: str) -> None:
        record = {"ended": ended, "steps": trainer.state.global_step}
        (Path(out).parent / f"exit-{trainer.process_index}.json").write_text(json.dumps(record))

    with recording_end(write):
        trainer.train()


def main() -> None:
    out, solver, n, stall = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    torch.set_num_threads(1)

    follow = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    parameters = [{"a": float(i), "t": float(i % 2), "follow": follow} for i in range(n)]
    trainer = study_trainer(
        out, solver, parameters, 2, ReceiverConfig(stall_timeout=stall), process, batch_size=4
    )
    train_recording_exit(trainer, out)


if __name__ == "__main__":
    main()
