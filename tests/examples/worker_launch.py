"""A study run to its end under a real launcher (the local backend), in worker mode or one
process per simulation, for the tests of the examples' workers and of
`serve_simulations`: what the launcher recorded of each simulation's attempts, and
every sample the receiver took. Imported by name from
tests/examples/ (pytest's prepend import mode puts that folder on `sys.path`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from helpers import drain

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


def run_study_to_end(
    command: Sequence[str],
    parameters: Sequence[Mapping[str, float]],
    rendezvous: Path,
    tuning: LauncherTuning,
    env: dict[str, str] | None = None,
    timeout: float = 90.0,
    *,
    job_limit: int = 1,
    worker: bool = True,
) -> tuple[dict[int, dict[str, Any]], list[dict[str, np.ndarray]]]:
    """Run `command` on `parameters`, one simulation each, as `job_limit` workers
    (`worker`) or one process per simulation, until every simulation has finished or
    been given up and its data received (an AssertionError after `timeout` s); returns
    the launcher's record by simulation id (`records_of`: its ``exit_codes``, ...) and
    the samples received, in order. The launcher and the receiver are stopped on the
    way out, whatever happened."""
    buffer = FIFOBuffer(1000)
    receiver = Receiver(buffer, config=ReceiverConfig(rendezvous_dir=rendezvous))
    receiver.start()
    launch = Launcher(list(command), list(parameters), len(parameters), job_limit=job_limit,
                      backend=LocalBackend(), worker=worker, env=env, tuning=tuning)  # fmt: skip
    try:
        launch.start(rendezvous, heartbeat=receiver.activity, data=receiver)
        deadline = time.monotonic() + timeout
        while not launch.done:  # every simulation finished or given up, its data received
            launch.check()
            assert time.monotonic() < deadline, "the study did not end"
            time.sleep(0.02)
        record = records_of(launch.state_dict())
    finally:
        launch.stop()
        receiver.stop()
    buffer.close()  # (no expected count: the stream ends here, every attempt over)
    return record, drain(buffer, timeout=5)
