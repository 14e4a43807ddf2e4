"""Run under `accelerate launch --multi_gpu --num_processes 2` by
tests/trainer/test_rank_figures.py: a `StreamSource` on each rank, its receiver's
rendezvous file in OUT/rendezvous, fed by tests/scripts/stream_client.py processes
that the test starts (its routing sends time step t to rank ``t % 2``), so that the
ranks receive unequal shares. The stream ends when 2 simulations have finished. Each
rank writes its final log to OUT/rank_R.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from melissa_trainer import (
    ArgumentParser,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    TrainingArguments,
)


def xy(sample: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(sample["x"]), torch.from_numpy(sample["y"])


def main() -> None:
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    config = ReceiverConfig(
        expected_simulations=2,
        rendezvous_dir=Path(args.output_dir) / "rendezvous",
        fields={"x": ((1,), "<f4"), "y": ((1,), "<f4")},
    )
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=StreamSource(config),
        process_sample=xy,
    )
    state = trainer.train()
    last = next(h for h in reversed(state.log_history) if "buffer_put" in h)
    out = Path(args.output_dir) / f"rank_{trainer.process_index}.json"
    out.write_text(json.dumps({"last_log": last, "global_step": state.global_step}))


if __name__ == "__main__":
    sys.exit(main())
