"""Run by tests/trainer/test_no_training_routing.py under ``accelerate launch --multi_gpu
--num_processes 2`` (gloo on CPU): the trial's study (user trial htrial14, "fail2"): 2
simulations of one time step each, of which simulation 1 exits 1 before sending and is
replaced by a redraw, simulation 2 (``max_restarts=0``). Simulations 0 and 2 are both
even, so the client's routing ``(simulation_id + t) % 2`` sends both samples to rank 0
and rank 1 receives none: the run fails with `NoTrainingError`.

    python one_step_redraw_study.py OUT SOLVER

Each rank writes ``OUT/../exit-<rank>.txt``: how `train()` ended (the exception's class
or "returned") and the steps trained.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, make_sampler

#: one time step of x = (a, 0) through the library's client; simulation 1 exits 1 first
SOLVER = r"""
import sys
import numpy as np
from melissa_trainer.client import Client

with Client({"x": ((2,), "f4")}) as c:
    if c.simulation_id == 1:
        sys.exit(1)
    c.send(0, x=np.array([c.parameters["a"], 0.0], np.float32))
"""


def main() -> None:
    out, solver = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    launcher = Launcher(
        [sys.executable, solver],
        make_sampler("lhs", {"a": (0.0, 1.0)}, seed=0),
        2,
        job_limit=2,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)

    def process(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
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
        step = trainer.state.global_step
        (Path(out).parent / f"exit-{trainer.process_index}.txt").write_text(f"{ended} {step}\n")


if __name__ == "__main__":
    main()
