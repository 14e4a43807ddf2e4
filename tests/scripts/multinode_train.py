"""One node's training, run by tests/trainer/test_multinode.py in a network namespace under
``accelerate launch --multi_gpu --num_machines 2 --machine_rank R ...`` (gloo, one CPU
process per node).

The documented multi-node set-up: each rank's receiver binds every interface and
publishes ``--node_address`` (its node's address) in the rendezvous directory, with
CURVE (the secret key from ``$MULTINODE_CURVE_SECRET``, the same on every node). The
study's launcher (rank 0, node0) runs `--workers` workers in worker mode, asking for
simulations over CURVE at node0's address; each worker is started as ``ip netns exec
SIMS python multinode_worker.py``, in the simulations' namespace.

Each rank writes ``{output_dir}/{--run}_rank_R.json`` (a run resumed in the same
output_dir, under another `--run`, leaves the first run's records alone): every
``(simulation, time step)`` it turned into a pair (``seen``) and trained on
(``trained``, one list per step), a SHA-256 of the model's parameters after every step,
and its step and world size; a run stopped (`Preempted`) writes it too, before exiting.
At its first step's end each rank writes ``{output_dir}/{--run}_training_R`` (its pid):
tests/trainer/test_multinode_launcher_death.py kills a launcher once both are there,
with ``--pace`` (seconds between a worker's time steps) so that the study outlasts the
stop.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import small_model  # noqa: E402

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler  # noqa: E402

WORKER = Path(__file__).with_name("multinode_worker.py")


@dataclass
class ScriptArgs:
    node_address: str = ""
    sims_netns: str = ""
    simulations: int = 8
    steps: int = 4
    workers: int = 2
    record: str = ""
    run: str = "run"
    #: seconds each worker waits between two time steps it sends (0: as fast as it can)
    pace: float = 0.0


class Checksums(Hook):
    """The SHA-256 of every parameter's bytes, in order, after each optimizer step."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, str]] = []

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        digest = hashlib.sha256()
        for p in trainer.model.parameters():
            digest.update(p.detach().cpu().numpy().tobytes())
        self.steps.append((state.global_step, digest.hexdigest()))


class SayTraining(Hook):
    """Writes ``{output_dir}/{run}_training_R`` (this rank's pid) at the first step's end:
    a test that kills a launcher while the ranks train waits for both files."""

    def __init__(self, output_dir: str, run: str) -> None:
        self.output_dir, self.run, self.said = Path(output_dir), run, False

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if not self.said:
            path = self.output_dir / f"{self.run}_training_{trainer.process_index}"
            path.write_text(str(os.getpid()))
            self.said = True


class Trained(Hook):
    """The ``(simulation, time step)`` of each micro-batch trained, in order (read when
    the batch is ready, so a batch taken but never trained is not recorded)."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int]]] = []

    def on_batch_ready(
        self, trainer: Any, state: TrainerState, control: TrainerControl, batch: Any
    ) -> None:
        samples = trainer.dataset.last_samples
        self.batches.append([(int(s["simulation_id"]), int(s["time_step"])) for s in samples])


class Keys:
    """`process_sample` recording each ``(simulation, time step)`` it turns into a pair."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def __call__(self, s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen.append((int(s["simulation_id"]), int(s["time_step"])))
        return torch.from_numpy(s["x"]), torch.from_numpy(s["y"])


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    # the library's INFO messages in the node's log (the resize test reads one)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("melissa_trainer").setLevel(logging.INFO)
    torch.set_num_threads(1)
    secret = os.environ["MULTINODE_CURVE_SECRET"]
    worker = ["ip", "netns", "exec", opts.sims_netns, sys.executable, str(WORKER)]
    worker += ["--steps", str(opts.steps), "--record", opts.record, "--pace", str(opts.pace)]
    launcher = Launcher(
        worker,
        UniformSampler({"a": (0.5, 1.5)}, seed=0),
        opts.simulations,
        job_limit=opts.workers,
        worker=True,
        worker_bind="tcp://*:*",
        advertise_host=opts.node_address,
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    stream = StreamSource(
        ReceiverConfig(
            bind="tcp://*:*",
            advertise_host=opts.node_address,
            fields={"x": ((3,), "float32"), "y": ((1,), "float32")},
            curve_secret_key=secret,
            stall_timeout=20.0,  # a failure shows in seconds (the run takes ~8 s)
        )
    )
    model = small_model(0)
    keys, checksums, trained = Keys(), Checksums(), Trained()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.05),
        train_source=Study(launcher, stream),
        process_sample=keys,
        hooks=[checksums, trained, SayTraining(args.output_dir, opts.run)],
    )
    try:
        trainer.train()
    finally:  # (a stopped run's record too: a resume test adds up both runs')
        record(trainer, opts, args, keys, checksums, trained, launcher)


def record(
    trainer: Any,
    opts: ScriptArgs,
    args: TrainingArguments,
    keys: Keys,
    checksums: Checksums,
    trained: Trained,
    launcher: Launcher,
) -> None:
    """Write this rank's ``{run}_rank_R.json`` (the module docstring)."""
    state = trainer.state
    result = {
        "rank": trainer.process_index,
        "world_size": trainer.num_processes,
        "backend": str(torch.distributed.get_backend()) if trainer.stop_sync.distributed else None,
        "global_step": state.global_step,
        "stream_ended": state.stream_ended,
        "seen": keys.seen,
        "trained": trained.batches,
        "checksums": checksums.steps,
        "launcher": launcher.summary() if trainer.process_index == 0 else None,
    }
    out = Path(args.output_dir) / f"{opts.run}_rank_{trainer.process_index}.json"
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
