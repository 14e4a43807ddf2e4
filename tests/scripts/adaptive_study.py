"""An adaptive study on two training ranks, run by tests/trainer/test_simulation_loss.py under
``accelerate launch --multi_gpu --num_processes 2`` (gloo on CPU).

The launcher (rank 0) runs `--workers` workers in worker mode (`adaptive_worker.py`),
its sampler a `BreedSampler`; every simulation's time steps are spread over both ranks
(step t of simulation s on rank (s + t) % 2), so that each simulation's loss is made of
both ranks' samples.
Each rank writes ``{output_dir}/rank_R.json``: the ``(simulation, time step)`` pairs it
trained on, its `trainer.simulation_losses`, and on rank 0 the sampler's observations,
position and exploration draws, and every simulation's parameters.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import small_model  # noqa: E402
from multinode_train import Keys  # noqa: E402  (this script's directory is on the path)

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, make_sampler  # noqa: E402
from melissa_trainer.launcher.simulation_record import records_of  # noqa: E402

WORKER = Path(__file__).with_name("adaptive_worker.py")


@dataclass
class ScriptArgs:
    simulations: int = 16
    steps: int = 6
    workers: int = 2


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    sampler = make_sampler("breed", {"a": (0.0, 1.0)}, seed=1, exploration=0.25, min_observations=2)
    launcher = Launcher(
        [sys.executable, str(WORKER), "--steps", str(opts.steps)],
        sampler,
        opts.simulations,
        job_limit=opts.workers,
        worker=True,
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    stream = StreamSource(ReceiverConfig(fields={"x": ((3,), "float32"), "y": ((1,), "float32")}))
    model = small_model(0)
    keys = Keys()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.05),
        train_source=Study(launcher, stream),
        process_sample=keys,
    )
    state = trainer.train()
    result = {
        "rank": trainer.process_index,
        "world_size": trainer.num_processes,
        "global_step": state.global_step,
        "seen": keys.seen,
        "losses": [list(vars(loss).values()) for loss in trainer.simulation_losses.values()],
        "reductions": trainer.simulation_losses.reductions,
    }
    if trainer.process_index == 0:
        result["observations"] = [
            [o.simulation_id, o.parameters, o.loss] for o in sampler.observations
        ]
        result["position"], result["explored"] = sampler.position, sampler.explored
        records = records_of(launcher.state_dict())
        result["parameters"] = {sid: r["parameters"] for sid, r in records.items()}
        result["summary"] = launcher.summary()
    out = Path(args.output_dir) / f"rank_{trainer.process_index}.json"
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
