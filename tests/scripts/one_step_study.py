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

from melissa_trainer import (
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

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
    launcher = Launcher(
        [sys.executable, solver],
        [{"a": float(i)} for i in range(n)],
        n,
        job_limit=n,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    seen: list[int] = []

    def process(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(int(s["simulation_id"]))
        return torch.from_numpy(s["x"][:1]), torch.from_numpy(s["x"][1:])

    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=out, batch_size=1, buffer="fifo", buffer_size=8, watermark=1,
            disable_progress_bar=True, report_to="none", stop_sync_steps=1,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=process,
    )  # fmt: skip
    ended = "returned"
    try:
        trainer.train()
    except BaseException as exc:
        ended = type(exc).__name__
        raise
    finally:
        record = {"ended": ended, "steps": trainer.state.global_step, "seen": sorted(set(seen))}
        (Path(out).parent / f"exit-{trainer.process_index}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
