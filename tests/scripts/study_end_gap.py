"""Run by tests/trainer/test_study_end_gap_ranks.py under ``accelerate launch --multi_gpu
--num_processes 2`` (gloo on CPU): a study of N solvers (`SOLVER`, written by the test
to argv[2]) whose messages to rank 1 are lost for simulation 1.

    python study_end_gap.py OUT SOLVER [reservoir]

Rank 0's launcher counts every simulation finished (rank 0 has their data); rank 1's
stream lacks simulation 1. Rank 1 must stop with the error that names it, within the
grace after rank 0's STUDY_END, not at its stall timeout (600 s): the script exits
non-zero; "training ended" is printed only if `train()` returned.

With ``reservoir`` (the default buffer, rate-limited; `RESERVOIR` says the study, whose
simulation 2 rank 1 lacks), rank 0 cannot take in its last simulations' data: rank 1
waits for data, rank 0 waits for rank 1 in the stop agreement and draws nothing, so its
rate limit holds its inserts back. Its launcher then never counts them finished (exit
0, "exited"): the STUDY_END is sent once no job is alive, nothing is left to start and
rank 0's receiver has waited for room for a while (`study.end_notice`).
"""

from __future__ import annotations

import sys

import torch

from melissa_trainer import (
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

N = 3
#: the reservoir study: (simulations, steps each, the id whose messages to rank 1 are lost)
RESERVOIR = (6, 20, 2)
#: rank 1's stall timeout: far past the test's bound, so that only the STUDY_END ends it
STALL_TIMEOUT = 600.0
#: a solver that streams STEPS steps of x = (a, t) round robin to the ranks of the
#: rendezvous, except that its messages to rank 1 are lost when its id is DROP (1)
SOLVER = r"""
import json, os
import numpy as np, zmq
from melissa_trainer import wire as P
from melissa_trainer.stream.endpoints import fetch_rendezvous

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
entries = fetch_rendezvous(os.environ["MELISSA_TRAINER_RENDEZVOUS"], timeout=30)
run_id = os.environ.get("MELISSA_TRAINER_RUN_ID")
lost = {1} if sid == int(os.environ.get("DROP", "1")) else set()
x = P.FieldSpec("x", np.dtype("<f4"), (2,))
ctx = zmq.Context()
socks = {}
for e in entries:
    if int(e["rank"]) not in lost:
        socks[int(e["rank"])] = s = ctx.socket(zmq.PUSH)
        s.connect(e["endpoint"])
world, steps = len(entries), int(os.environ.get("STEPS", "4"))
for s in socks.values():
    s.send(P.encode_hello(sid, 0, 1, [x], params, run_id=run_id))
for t in range(steps):
    if t % world in socks:
        head = P.encode_data_header(sid, t, 0, 1, b"x", P.dtype_code(x.dtype), x.shape, 0, 2, True)
        socks[t % world].send(head + np.array([params["a"], t], "<f4").tobytes())
for r, s in socks.items():
    s.send(P.encode_bye(sid, 0, 1, len(range(r, steps, world))))
    s.close(linger=-1)
ctx.term()
"""


def main() -> None:
    out, solver = sys.argv[1], sys.argv[2]
    reservoir = sys.argv[3:] == ["reservoir"]
    n, steps, drop = RESERVOIR if reservoir else (N, 8, 1)
    # (the reservoir study: the trial's defaults, buffer and size; the fifo one: one that
    # a rate limit does not hold back, so every simulation is counted finished)
    buffer = {} if reservoir else {"buffer": "fifo", "buffer_size": 64, "watermark": 1}
    torch.set_num_threads(1)
    launcher = Launcher(
        [sys.executable, solver],
        [{"a": float(i)} for i in range(n)],
        n,
        job_limit=3 if reservoir else n,
        backend=LocalBackend(),
        env={"STEPS": str(steps), "DROP": str(drop)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=out,
            batch_size=2,
            **buffer,  # type: ignore[arg-type]
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=2,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig(stall_timeout=STALL_TIMEOUT))),
        process_sample=lambda s: (torch.from_numpy(s["x"][:1]), torch.from_numpy(s["x"][1:])),
    )
    trainer.train()
    print("training ended", flush=True)


if __name__ == "__main__":
    main()
