"""Run by tests/trainer/test_starved_study_fails.py under ``accelerate launch
--multi_gpu --num_processes 2`` (gloo on CPU): the study of starved_rank.py (every
sample goes to rank 0: rank 1 starves, rank 0 waits for it in the step agreement, back-
pressured), whose launcher then fails for good (the hang of a user trial, 2026-12-01:
nothing said for stall_timeout, then a starvation message that never named the study's
failure).

N simulations of one time step each, routed to rank 0 as in starved_rank.py; a
simulation that starts once rank 0's launcher has raised its bound for the starved rank
(``lifted`` in rank 0's ``study_progress.json``: rank 1 starves and rank 0 is back-
pressured, so its training thread is out of its source) exits 3 before its HELLO; with
no restart and ``min_finished_fraction=1.0`` that one failure fails the study for good.

    python starved_rank_study_fails.py OUT SOLVER N STALL_TIMEOUT

Each rank writes ``OUT/../exit-<rank>.json``: how `train()` ended and the steps trained.
"""

from __future__ import annotations

import sys

import torch
from rank_study import study_trainer
from starved_rank import process, train_recording_exit

from melissa_trainer import ReceiverConfig
from melissa_trainer.launcher import LauncherTuning

#: one time step, numbered by the parameter "t", of x = (a, 0), routed to rank 0; exit 3
#: before the HELLO once rank 0's bound is raised for the starved rank
SOLVER = r"""
import json, os, sys
import numpy as np

progress = os.path.join(os.environ["MELISSA_TRAINER_RENDEZVOUS"], "study_progress.json")
try:
    lifted = bool(json.load(open(progress)).get("lifted"))
except (OSError, ValueError):
    lifted = False
if lifted:
    print("failing on purpose: rank 0's bound is raised for a starved rank", flush=True)
    sys.exit(3)
from melissa_trainer.client import Client

with Client({"x": ((2,), "f4")}) as c:
    c.send(int(c.parameters["t"]), x=np.array([c.parameters["a"], 0.0], np.float32))
"""


def main() -> None:
    out, solver, n, stall = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    torch.set_num_threads(1)

    parameters = [{"a": float(i), "t": float(i % 2)} for i in range(n)]
    tuning = LauncherTuning(
        poll_interval=0.05,
        kill_grace=2.0,
        max_restarts=0,
        on_failure="abandon",
        min_finished_fraction=1.0,
    )
    trainer = study_trainer(
        out, solver, parameters, 2, ReceiverConfig(stall_timeout=stall), process,
        tuning=tuning, batch_size=4,
    )  # fmt: skip
    train_recording_exit(trainer, out)


if __name__ == "__main__":
    main()
