"""Run under `accelerate launch --multi_gpu --num_processes 2` by tests/trainer/test_distributed.py.

Rank 0 streams `--short` batches, rank 1 `--long` batches; an optional hook on rank 1
asks to stop at `--stop_at`; with `--nan_at I`, rank 1's I-th sample holds a NaN. Each
rank writes what it saw to OUT/rank_R.json (with `error_step`, the step a
`NonFiniteLossError` named, which then ends the script with it).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    Hook,
    NonFiniteLossError,
    OnlineTrainer,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)


@dataclass
class ScriptArgs:
    short: int = 10
    long: int = 100
    stop_at: int = 0
    nan_at: int = -1


class StopOnRank1(Hook):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if trainer.process_index == 1 and state.global_step == self.step:
            control.should_stop = True


class SeenIndices(Hook):
    """How many times each sample (its "index") was trained on, on this rank."""

    def __init__(self) -> None:
        self.times: dict[int, int] = {}

    def on_batch_ready(
        self, trainer: Any, state: TrainerState, control: TrainerControl, batch: Any
    ) -> None:
        for sample in trainer.dataset.last_samples:
            i = int(sample["index"])
            self.times[i] = self.times.get(i, 0) + 1


def simulation_mse(model: torch.nn.Module, samples: list[dict[str, Any]]) -> list[float]:
    """Each simulation's mean squared error, in id order, computed here (not by the
    trainer): the oracle of its eval_loss_p99 and eval_loss_max."""
    errors: dict[int, list[float]] = {}
    with torch.no_grad():
        for sample in samples:
            x, y = xy(sample)
            error = float(((model(x[None]) - y[None]) ** 2).mean())
            errors.setdefault(int(sample["simulation_id"]), []).append(error)
    return [float(np.mean(errors[k])) for k in sorted(errors)]


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def source(rank: int, world: int):
        batches = opts.short if rank == 0 else opts.long
        for i, sample in enumerate(linear_samples(batches * args.batch_size, seed=rank)):
            if rank == 1 and i == opts.nan_at:
                sample["x"][0] = float("nan")
            yield sample

    seen = SeenIndices()
    hooks = [seen, *([StopOnRank1(opts.stop_at)] if opts.stop_at else [])]
    # 3 held-out simulations: rank 0 evaluates positions 0, 2, 4.., rank 1 the others,
    # so each simulation's sum is split over the ranks (the tails' reduction)
    validation = [{**s, "simulation_id": np.array(i % 3)} for i, s in
                  enumerate(linear_samples(10, seed=7))]  # fmt: skip
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=source,
        process_sample=xy,
        hooks=hooks,
        eval_dataset=validation,
    )
    error: NonFiniteLossError | None = None
    try:
        trainer.train()
    except NonFiniteLossError as exc:
        error = exc
    state = trainer.state
    params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
    result = {
        "rank": trainer.process_index,
        "world_size": trainer.num_processes,
        "backend": str(torch.distributed.get_backend()) if trainer.stop_sync.distributed else None,
        "global_step": state.global_step,
        "samples_seen": state.samples_seen,
        "stream_ended": state.stream_ended,
        "distinct_seen": len(seen.times),
        "seen_again": sorted(i for i, n in seen.times.items() if n > 1),
        "collectives": trainer.stop_sync.collectives,
        "param_sum": float(params.double().sum()),
        "eval_loss": [h["eval_loss"] for h in state.log_history if "eval_loss" in h],
        "losses": [h["loss"] for h in state.log_history if "loss" in h],
        "eval_tails": [
            [h["eval_loss_p99"], h["eval_loss_max"], h["eval_simulations"]]
            for h in state.log_history
            if "eval_loss" in h
        ],  # fmt: skip
        "eval_worst": [h["eval_worst_simulation"] for h in state.log_history if "eval_loss" in h],
        "held_out_losses": None
        if trainer.held_out_losses is None
        else [trainer.held_out_losses.ids, trainer.held_out_losses.losses],  # fmt: skip
        # the oracle: each held-out simulation's MSE by the model itself, on this rank
        "simulation_mse": simulation_mse(
            trainer.accelerator.unwrap_model(trainer.model), validation
        ),  # fmt: skip
        "error_step": None if error is None else error.step,
        # what the step ran: the prepared (DDP) model compiled, with --torch_compile
        "compiled_step": type(getattr(trainer._step, "forward", trainer._step.model)).__name__,
    }
    out = Path(args.output_dir) / f"rank_{trainer.process_index}.json"
    out.write_text(json.dumps(result))
    if error is not None:
        raise error


if __name__ == "__main__":
    main()
