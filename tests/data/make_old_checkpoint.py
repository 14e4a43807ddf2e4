"""Write the committed checkpoint fixture that proves old checkpoints resume.

    PYTHONPATH=. python tests/data/make_old_checkpoint.py [DEST]

Runs a tiny real study (one training rank): a 3-4-1 MLP trained with Adam on 4
simulations of 6 steps, two at a time, launched by the local backend; simulation 0
streams all its steps, 1 and 2 stream 3 steps and stall on their first attempt, so
the run stops at ``max_steps=12`` (batch 1) with 0 finished, 1 and 2 half trained
on and 3 not drawn yet. Its final checkpoint holds every part a real run's has:
Accelerate's model, optimizer and RNG files, the trainer state, the hooks, the
buffer and the pending batches, the source's state (the launcher's records and the
receiver's record of each simulation), this rank's figures and the per-simulation
losses (``simulation_loss_steps=2``). It is copied to DEST (default
``tests/data/checkpoint_v1``: the checkpoint layout before the format was versioned).

`build_trainer` is also what `tests/checkpoint/test_old_checkpoint.py` resumes it with: the same
study, so the resumed run may continue it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from helpers import Keys  # noqa: E402

from melissa_trainer import (  # noqa: E402
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.common.checkpoint_names import latest_checkpoint  # noqa: E402
from melissa_trainer.launcher import (  # noqa: E402
    Launcher,
    LauncherTuning,
    LocalBackend,
    make_sampler,
)

STEPS, SIMULATIONS, SEED = 6, 4, 5
#: the samples the first run trains on: all of 0's steps, half of 1's and 2's
FIRST_STEPS = STEPS + 2 * (STEPS // 2)
SIMULATION = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
with open(os.path.join(os.environ["SIM_OUT"], "launches.txt"), "a") as f:
    f.write(f"{sid} {attempt}\n")
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(STEPS):
        if attempt == 0 and sid in (1, 2) and t == STEPS // 2:
            client.flush()
            time.sleep(600)  # stalled: the first run stops and kills it
        x = np.array([params["a"], params["b"], t / 10], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
""".replace("STEPS", str(STEPS))


def model() -> torch.nn.Module:
    """The tiny MLP, initialised from seed 0."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


def build_trainer(out: Path, keys: Keys, **overrides: Any) -> OnlineTrainer:
    """The study's trainer, writing under `out` (its simulation script included)."""
    (out / "sim.py").write_text(SIMULATION)
    launcher = Launcher(
        [sys.executable, str(out / "sim.py")],
        make_sampler("uniform", {"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=SEED),
        SIMULATIONS,
        job_limit=2,
        backend=LocalBackend(),
        env={"SIM_OUT": str(out)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    net = model()
    args = TrainingArguments(
        output_dir=str(out / "run"),
        buffer="fifo",
        buffer_size=16,
        watermark=1,
        batch_size=1,
        logging_steps=5,
        stop_sync_steps=2,
        simulation_loss_steps=2,
        disable_progress_bar=True,
        report_to="none",
        **overrides,
    )
    return OnlineTrainer(
        net,
        args,
        torch.optim.Adam(net.parameters(), lr=1e-2),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=keys,
    )


def main(dest: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        keys = Keys()
        build_trainer(out, keys, max_steps=FIRST_STEPS).train()
        expected = [(0, t) for t in range(STEPS)] + [(s, t) for s in (1, 2) for t in range(3)]
        assert sorted(keys.seen) == sorted(expected), keys.seen
        checkpoint = latest_checkpoint(out / "run" / "checkpoints")
        assert checkpoint is not None
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(checkpoint, dest)
    print(f"wrote {dest} ({sum(p.stat().st_size for p in dest.rglob('*') if p.is_file())} B)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "checkpoint_v1")
