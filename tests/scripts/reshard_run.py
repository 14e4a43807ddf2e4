"""Run under `accelerate launch --num_processes N` by
tests/checkpoint/test_reshard_real_ranks.py: a run that may resume from a checkpoint of
another number of ranks.

Each rank streams `--samples` samples whose ``index`` is unique across ranks and
launches (``--offset + rank * 100000 + i``) and whose ``simulation_id`` is
``index % 7``. When it resumes, each rank writes what it loaded to
OUT/{--tag}load_rank_R.json (from `on_load`, before training goes on); at the end,
what it trained to OUT/{--tag}end_rank_R.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import small_model, xy  # noqa: E402

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    Hook,
    OnlineTrainer,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)


@dataclass
class ScriptArgs:
    tag: str = ""  # prefix of the result files
    samples: int = 400  # per rank
    offset: int = 0  # of the samples' index


def samples(n: int, offset: int, rank: int) -> Iterator[dict[str, np.ndarray]]:
    rng = np.random.default_rng(offset + rank)
    w = np.arange(1, 4, dtype=np.float32)
    for i in range(n):
        x = rng.standard_normal(3).astype(np.float32)
        index = offset + rank * 100000 + i
        yield {
            "x": x,
            "y": np.asarray([x @ w], dtype=np.float32),
            "index": np.asarray(index, dtype=np.int64),
            "simulation_id": np.asarray(index % 7, dtype=np.int64),
        }


def held_indices(trainer: OnlineTrainer) -> list[int]:
    """The ``index`` of every sample this rank's buffer holds (its retained ones too)."""
    arrays, _ = trainer.buffer.state_dict()
    return sorted(int(v) for k, v in arrays.items() if k.endswith("/index"))


def digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of the tensors' bytes, by name (the test digests the checkpoint's alike)."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def cuda_rng() -> str | None:
    """SHA-256 of this process's current CUDA generator state (None without CUDA)."""
    if not torch.cuda.is_available():
        return None
    return hashlib.sha256(torch.cuda.get_rng_state().numpy().tobytes()).hexdigest()


class Dump(Hook):
    """Writes what the rank loaded (`on_load`)."""

    def __init__(self, out: Path, tag: str) -> None:
        self.out, self.tag = out, tag

    def on_load(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        _, meta = trainer.buffer.state_dict()
        losses = trainer.simulation_losses.state_dict()
        model = trainer.accelerator.unwrap_model(trainer.model)
        result = {
            "world_size": trainer.num_processes,
            "global_step": state.global_step,
            "total_samples_seen": state.total_samples_seen,
            "samples_seen": state.samples_seen,
            "loss_sum": float(trainer.log_figures.loss_sum),
            "loss_count": trainer.log_figures.loss_count,
            "pending": trainer.dataset.num_pending,
            "held": held_indices(trainer),
            "buffer_put": meta["put"],
            "buffer_got": meta["got"],
            "loss_ids": losses["ids"].tolist(),
            "loss_draws": losses["draws"].tolist(),
            "unreduced_ids": losses["unreduced_ids"].tolist(),
            "unreduced_losses": losses["unreduced_losses"].tolist(),
            "torch_rng": hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest(),
            "cuda_rng": cuda_rng(),
            "model": digest(model.state_dict()),
            "accelerate_step": trainer.accelerator.step,
        }
        name = f"{self.tag}load_rank_{trainer.process_index}.json"
        (self.out / name).write_text(json.dumps(result))


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0, dropout=0.2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    out = Path(args.output_dir)
    rank = int(os.environ.get("RANK", "0"))
    trainer = OnlineTrainer(
        model,
        args,
        optimizer,
        train_source=lambda r, world: samples(opts.samples, opts.offset, r),
        process_sample=xy,
        hooks=[Dump(out, opts.tag)],
    )
    state = trainer.train()
    result = {
        "world_size": trainer.num_processes,
        "global_step": state.global_step,
        "samples_seen": state.samples_seen,
        "total_samples_seen": state.total_samples_seen,
    }
    (out / f"{opts.tag}end_rank_{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
