"""Run by tests/trainer/test_one_step_ranks.py under ``accelerate launch --multi_gpu
--num_processes 2`` (gloo on CPU): a study of N simulations of one time step each (a
steady-state solver's), each streaming through the library's client, which reads the
rendezvous and so routes its step 0 to rank ``simulation_id % 2`` (docs/protocol.md
section 3).

    python one_step_study.py OUT SOLVER N

Each rank writes ``OUT/../exit-<rank>.json``: how `train()` ended (the exception's
class or "returned"), the steps trained and the simulation ids of the samples it
trained on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from rank_study import recording_end, study_trainer

from melissa_trainer import ReceiverConfig

#: one time step of x = (a, 0) through the library's client (run id, rendezvous and
#: parameters from the launcher's environment)
SOLVER = r"""
import numpy as np
from melissa_trainer.client import Client

with Client({"x": ((2,), "f4")}) as c:
    c.send(0, x=np.array([c.parameters["a"], 0.0], np.float32))
"""


def main() -> None:
    out, solver, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    seen: list[int] = []

    def process(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(int(s["simulation_id"]))
        return torch.from_numpy(s["x"][:1]), torch.from_numpy(s["x"][1:])

    trainer = study_trainer(
        out, solver, [{"a": float(i)} for i in range(n)], n, ReceiverConfig(), process,
        batch_size=1, buffer="fifo", buffer_size=8, watermark=1, stop_sync_steps=1,
    )  # fmt: skip

    def write(ended: str) -> None:
        record = {"ended": ended, "steps": trainer.state.global_step, "seen": sorted(set(seen))}
        (Path(out).parent / f"exit-{trainer.process_index}.json").write_text(json.dumps(record))

    with recording_end(write):
        trainer.train()


if __name__ == "__main__":
    main()
