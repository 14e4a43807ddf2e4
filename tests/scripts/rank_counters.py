"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_rank_counters.py.

Rank 0 streams 83 samples (10 batches of 8 and one of 3), rank 1 160: both stop after
11 steps, having seen 83 and 88 samples. The source's telemetry has a per-rank figure
(summed over ranks) and a study-level one (`study_keys`: the maximum is logged). Each
rank writes what it saw to OUT/{--tag}rank_R.json.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    IterableSource,
    OnlineTrainer,
    TrainingArguments,
)


@dataclass
class ScriptArgs:
    tag: str = ""  # prefix of the result files


class StudySource(IterableSource):
    study_keys = frozenset({"simulations_finished"})

    def __init__(self, rank: int) -> None:
        super().__init__(linear_samples(83 if rank == 0 else 160, seed=rank))
        self.rank = rank

    def telemetry(self) -> dict[str, float]:
        # every rank saw the whole study end (rank 1 one simulation short, late)
        return {"messages": 100.0 + self.rank, "simulations_finished": 16.0 - self.rank}


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    rank = int(__import__("os").environ.get("RANK", "0"))
    trainer = OnlineTrainer(
        model, args, optimizer, train_source=StudySource(rank), process_sample=xy
    )
    state = trainer.train()
    result = {
        "world_size": trainer.num_processes,
        "global_step": state.global_step,
        "samples_seen": state.samples_seen,
        "total_samples_seen": state.total_samples_seen,
        "logs": [h for h in state.log_history if "loss" in h],
        "collectives": trainer.stop_sync.collectives,
    }
    name = f"{opts.tag}rank_{trainer.process_index}.json"
    (Path(args.output_dir) / name).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
