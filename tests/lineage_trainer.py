"""The external-mode trainer that records what it trains on, shared by
tests/scripts/restart_ranks.py and serving_follow.py: ``Linear(3, 1)`` (seed 0, SGD) on a
`StreamSource` of one simulation whose receivers publish in ``--rendezvous`` (the solver
is the test's), and a log line before each training step, the oracle of "each
(simulation, time step) trained on once"."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TextIO

import torch

from melissa_trainer import Hook, OnlineTrainer, ReceiverConfig, StreamSource, TrainingArguments

__all__ = ["ScriptArgs", "lineage_trainer", "record_steps"]


@dataclass
class ScriptArgs:
    """The scripts' own flag, parsed beside `TrainingArguments`."""

    rendezvous: str = ""
    #: the stream's `ReceiverConfig.nonfinite` (tests/trainer/test_restart_after_nonfinite.py: fail)
    nonfinite: str = "refuse"


def record_steps(log: TextIO, before: Callable[[int], None] = lambda step: None) -> None:
    """Make every `OnlineTrainer` of this process, before each training step, call
    `before` with the step's number (it may raise: the step fails, unrecorded) and then
    append to `log` the step's number and the ``simulation:time_step`` of each sample of
    the batch it trains on, as ``STEP SIM:TS SIM:TS ...``."""
    plain_step = OnlineTrainer._training_step

    def recorded_step(self: OnlineTrainer, *, stage_next: bool = False) -> None:
        step = self.state.global_step + 1
        before(step)
        samples = self.dataset.peek_pending()  # the batch this step trains on
        assert samples is not None
        keys = " ".join(f"{int(s['simulation_id'])}:{int(s['time_step'])}" for s in samples)
        log.write(f"{step} {keys}\n")
        plain_step(self, stage_next=stage_next)

    OnlineTrainer._training_step = recorded_step  # type: ignore[method-assign,assignment]


def lineage_trainer(
    args: TrainingArguments, opts: ScriptArgs, hooks: Iterable[Hook] = ()
) -> OnlineTrainer:
    """The trainer with `args` and `hooks`, on the stream of one simulation published in
    ``opts.rendezvous``; torch on one thread (the scripts run beside other tests)."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=StreamSource(
            ReceiverConfig(
                expected_simulations=1, rendezvous_dir=opts.rendezvous, nonfinite=opts.nonfinite
            )
        ),
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
        hooks=list(hooks),
    )
