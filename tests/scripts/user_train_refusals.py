"""A user's own training script (not an example: no study_common), as the guide's
templates write it: the trainer built and trained inside
``with refusals_end_the_program():``. Run by tests/trainer/test_refusals_end_the_program.py,
with ``python`` or under ``accelerate launch``, on an output_dir another trainer holds."""

import numpy as np
import torch

from melissa_trainer import (
    ArgumentParser,
    OnlineTrainer,
    TrainingArguments,
    refusals_end_the_program,
)

(args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()


def simulations(rank, world_size):
    for sim in range(rank, 8, world_size):
        for step in range(4):
            yield {"x": np.full(3, sim + step, np.float32), "y": np.zeros(1, np.float32)}


def process_sample(s):
    return torch.from_numpy(s["x"]), torch.from_numpy(s["y"])


model = torch.nn.Linear(3, 1)
with refusals_end_the_program():
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), 0.01),
        train_source=simulations,
        process_sample=process_sample,
    )
    trainer.train()
