"""Two ranks under `accelerate launch` with uneven in-process streams and a
`SampleLedger` (tests/hooks/test_lineage_ranks.py): rank 0 holds `--short` batches of
simulations 0-1, rank 1 `--long` batches of simulations 100-101, so rank 0 pads while
rank 1 finishes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments
from melissa_trainer.hooks import SampleLedger


@dataclass
class ScriptArgs:
    short: int = 3
    long: int = 9


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)

    def source(rank: int, world: int) -> Any:
        n = (opts.short if rank == 0 else opts.long) * args.batch_size
        for i in range(n):  # two simulations per rank, time steps 0..n/2-1
            yield {"x": np.full(3, i, np.float32), "simulation_id": np.array(100 * rank + i % 2),
                   "time_step": np.array(i // 2)}  # fmt: skip

    OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-3), train_source=source,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["x"][:1])),
        hooks=[SampleLedger()],
    ).train()  # fmt: skip
    return None


if __name__ == "__main__":
    sys.exit(main())
