"""Run by tests/trainer/test_serving_follow.py: a trainer in external mode (a
`StreamSource` whose receivers publish in ``--rendezvous``; the solver is the test's)
that serves predictions (`ServingHook`, its serve file beside the receivers'), one
sample a step, and records what it trains on.

Before each training step it appends a line to ``$LINEAGE_LOG``: the step number and
the ``simulation:time_step`` of each sample of the batch (the oracle of "each (simulation,
time step) trained on once", as tests/scripts/heat_lineage.py). SIGTERM: a checkpoint,
exit 143 (`Preempted`); ``--resume_from_checkpoint latest`` resumes it. The stream ends
when the one simulation has finished.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from serving_parts import serving_hook  # noqa: E402

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    TrainingArguments,
)

log = open(os.environ["LINEAGE_LOG"], "a", buffering=1)  # noqa: SIM115 - the process's life
plain_step = OnlineTrainer._training_step


def recorded_step(self: OnlineTrainer, *, stage_next: bool = False) -> None:
    samples = self.dataset.peek_pending()  # the batch this step trains on
    assert samples is not None
    keys = " ".join(f"{int(s['simulation_id'])}:{int(s['time_step'])}" for s in samples)
    log.write(f"{self.state.global_step + 1} {keys}\n")
    plain_step(self, stage_next=stage_next)


OnlineTrainer._training_step = recorded_step  # type: ignore[method-assign]


@dataclass
class ScriptArgs:
    rendezvous: str = ""


def main() -> None:
    args, opts = ArgumentParser(TrainingArguments, ScriptArgs).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=StreamSource(
            ReceiverConfig(expected_simulations=1, rendezvous_dir=opts.rendezvous)
        ),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        hooks=[serving_hook()],
    )
    trainer.train()


if __name__ == "__main__":
    main()
