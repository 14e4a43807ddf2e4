"""Run on two ranks by tests/trainer/test_study_rank_killed.py: a study of two solvers
that stream until killed (`SOLVER`, one step every 10 ms), and rank 1 SIGKILLs itself
(as ``kill -9`` or the OOM killer would) in its hook's ``on_save`` of the first
checkpoint, ``checkpoint-4``: an event, not a time. Rank 0 finds it gone at its next
collective, stops its study and logs its account (which waits for rank 1's last counts:
`EveryRankReport.final_words`).

Each rank's stderr goes to ``OUT/stderr-<rank>.txt`` (fd 2 itself: its log lines), the
exception that ends a rank, its class and exit status, to ``OUT/exit-<rank>.txt``.

    python study_rank_killed.py OUT SOLVER
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import torch
from rank_study import study_trainer

from melissa_trainer import Hook, ReceiverConfig

RANK = int(os.environ.get("RANK", "0"))
SOLVER = r"""
import time
import numpy as np
from melissa_trainer.client import Client

with Client({"x": ((2,), "f4")}) as c:
    for t in range(1_000_000):  # (until the study stops: killed)
        c.send(t, x=np.array([c.parameters["a"], t * 1e-3], np.float32))
        time.sleep(0.01)
"""


class KillAtFirstSave(Hook):
    def on_save(self, trainer: Any, state: Any, control: Any, path: str) -> None:
        if RANK == 1:
            os.kill(os.getpid(), signal.SIGKILL)


def main(out: Path) -> None:
    torch.set_num_threads(1)

    def process(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(s["x"][:1]), torch.from_numpy(s["x"][1:])

    trainer = study_trainer(
        str(out), sys.argv[2], [{"a": 0.0}, {"a": 1.0}], 2, ReceiverConfig(), process,
        batch_size=1, buffer="fifo", buffer_size=8, watermark=1, stop_sync_steps=2,
        save_steps=4, max_steps=1_000_000,
    )  # fmt: skip
    trainer.hooks.add(KillAtFirstSave())
    trainer.train()
    print("training ended", flush=True)


if __name__ == "__main__":
    # (read here, not at import: the test imports this module for its SOLVER, where
    # sys.argv is pytest's, or an xdist worker's ["-c"])
    OUT = Path(sys.argv[1])
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"stderr-{RANK}.txt").open("w") as err:
        os.dup2(err.fileno(), 2)
    try:
        main(OUT)
    except BaseException as exc:
        (OUT / f"exit-{RANK}.txt").write_text(f"{type(exc).__name__} {getattr(exc, 'code', 1)}\n")
        raise
