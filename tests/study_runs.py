"""A `Launcher` run as the `Study` of a `StreamSource` on one rank, to its end
(`study_to_its_end`), or trained on by an `OnlineTrainer` (`study_trainer`): what the
tests of a real study share, from every folder (tests/launcher's account and worker
tests, tests/stream's, tests/study's and tests/trainer's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from helpers import Keys, drain
from waiting import wait_until

from melissa_trainer import Hook, OnlineTrainer, StreamSource, Study, TrainingArguments
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.account import SimulationOutcome
from melissa_trainer.stream.receiver_config import ReceiverConfig

__all__ = ["StudyEnd", "study_to_its_end", "study_trainer"]


@dataclass(frozen=True)
class StudyEnd:
    """What a study run to its end gave, read before it stopped."""

    #: every sample streamed, in order
    samples: list[dict[str, np.ndarray]]
    #: `Study.telemetry` once the study had ended (the stream's figures and the launcher's)
    telemetry: dict[str, float]
    #: `Launcher.outcomes` by simulation id once the study had ended
    outcomes: dict[int, SimulationOutcome]


def study_to_its_end(launch: Launcher, rendezvous: Path, **config: Any) -> StudyEnd:
    """Run `launch` as the `Study` of a `StreamSource` (its `ReceiverConfig` the
    rendezvous directory `rendezvous` and the fields `config`) on one rank, every sample
    taken, to its end (`Launcher.check` raising on a failure), then stop it (its
    account is logged as it stops). 90 s bound on the stream (without a sample), 60 s
    on the study's end."""
    source = Study(launch, StreamSource(ReceiverConfig(rendezvous_dir=rendezvous, **config)))
    buffer = FIFOBuffer(1000)
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        samples = drain(buffer, timeout=90)

        def ended() -> bool:
            launch.check()
            return launch.done

        wait_until(ended, "the study to end", 60.0)
        outcomes = {outcome.simulation_id: outcome for outcome in launch.outcomes()}
        return StudyEnd(samples, source.telemetry(), outcomes)
    finally:
        source.stop()


def study_trainer(
    launch: Launcher,
    output_dir: Path,
    process_sample: Callable[[Any], Any] | None = None,
    hooks: Sequence[Hook] = (),
    **args: Any,
) -> OnlineTrainer:
    """An `OnlineTrainer` of a linear model (3 inputs, 1 output; SGD at 1e-3) on the
    `Study` of `launch` (a `StreamSource` of the default `ReceiverConfig`), writing to
    `output_dir`: batches of 1 from a FIFO of 20, no progress bar, no tracker, a log
    every 100 steps, unless `args` (more `TrainingArguments`) say otherwise.
    `process_sample`: a `Keys()` of its own by default (the samples' (simulation, time
    step) trained on). Seed torch before, for the model's initial weights."""
    model = torch.nn.Linear(3, 1)
    options: dict[str, Any] = {
        "batch_size": 1,
        "buffer": "fifo",
        "buffer_size": 20,
        "logging_steps": 100,
        "disable_progress_bar": True,
        "report_to": "none",
    }
    return OnlineTrainer(
        model,
        TrainingArguments(output_dir=str(output_dir), **(options | args)),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launch, StreamSource(ReceiverConfig())),
        process_sample=Keys() if process_sample is None else process_sample,
        hooks=list(hooks),
    )
