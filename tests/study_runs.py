"""A `Launcher` run as the `Study` of a `StreamSource` on one rank, to its end
(`study_to_its_end`): what the tests of a real study share, from every folder
(tests/launcher's account and worker tests, tests/stream's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from helpers import drain
from waiting import wait_until

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.account import SimulationOutcome
from melissa_trainer.stream.receiver import ReceiverConfig

__all__ = ["StudyEnd", "study_to_its_end"]


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
