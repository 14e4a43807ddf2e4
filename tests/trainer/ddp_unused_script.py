"""Run by test_ddp_unused_parameters.py under `accelerate launch` (2 gloo ranks): a model
with a parameter its forward never uses (an optional head), trained on 2 x 40 samples."""

from __future__ import annotations

import numpy as np
import torch

from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments


class TwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = torch.nn.Linear(4, 1)
        self.unused = torch.nn.Linear(4, 1)  # no part in the loss: DDP waits for its gradient

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(x)


def source(rank: int, world_size: int):  # type: ignore[no-untyped-def]
    for i in range(rank, 80, world_size):
        yield {"x": np.full(4, i / 80, np.float32), "y": np.full(1, i / 80, np.float32)}


def main() -> None:
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.manual_seed(0)
    model = TwoHeads()
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=source,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
    )
    state = trainer.train()
    print(f"RAN {state.global_step} rank {trainer.process_index}", flush=True)


if __name__ == "__main__":
    main()
