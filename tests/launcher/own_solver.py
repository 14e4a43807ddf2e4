"""The studies of the own-solver tests (tests/launcher/test_own_solver*.py): a solver with
options (`SOLVER`: which parameters it reads, the shape it sends, a start-up sleep, a
hang or a failure on some ids), a launcher and rank 0's receiver started as a `Study`
starts them (`study`), the launcher's failure awaited (`failure`), a study run to its
end (`run_to_end`) and the start-up advice it said (`startup_advice`)."""

from __future__ import annotations

import dataclasses
import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import drain
from launcher_said import one_line
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherError, LauncherTuning, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

FAST = LauncherTuning(poll_interval=0.05, kill_grace=2.0)

#: a solver with options: which parameters it reads, the shape it sends, a start-up
#: sleep, a hang on some ids
SOLVER = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client

options = json.loads(sys.argv[1])
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
time.sleep(options.get("startup", 0.0))  # (a JIT's compile time)
if sid in options.get("hang", []) and attempt in options.get("hang_at_start", []):
    time.sleep(600)  # this attempt stalls in its set-up, before its first message
if sid in options.get("fail", []):
    sys.exit("diverged before its first step")
shape = tuple(options.get("wrong_shape" if sid in options.get("wrong", []) else "shape", [4]))
client = Client({"u": ((shape), "float32")})
values = [client.parameters[name] for name in options.get("reads", ["x"])]
blown = sid in options.get("nan", [])  # blows up from its first step
for t in range(options.get("steps", 3)):
    client.send(t, u=np.full(shape, np.nan if blown else sum(values) + t, np.float32))
    time.sleep(options.get("step_time", 0.0))  # (a solver's time step)
    if sid in options.get("hang", []) and t + 1 >= options.get("hang_after", 1):
        time.sleep(600)  # stalls after its first step (or hang_after), whenever it runs
client.close()
"""


def solver(tmp_path: Path, **options: Any) -> list[str]:
    path = tmp_path / "solver.py"
    path.write_text(textwrap.dedent(SOLVER))
    escaped = json.dumps(options).replace("{", "{{").replace("}", "}}")
    return [sys.executable, str(path), escaped]


def study(
    tmp_path: Path,
    sim: list[str],
    n: int,
    bounds: dict[str, tuple[float, float]],
    *,
    fields: Any = "first",
    tuning: dict[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[Launcher, Receiver, FIFOBuffer]:
    """A launcher and rank 0's receiver, started as a `Study` starts them."""
    buffer = FIFOBuffer(1000)
    config = ReceiverConfig(
        expected_simulations=n, rendezvous_dir=tmp_path / "rendezvous", fields=fields
    )
    receiver = Receiver(buffer, config=config)
    receiver.start()
    receiver.report_refusals_to_launcher()
    launch = Launcher(
        sim,
        make_sampler("uniform", bounds, seed=0),
        n,
        backend=LocalBackend(),
        tuning=dataclasses.replace(FAST, **(tuning or {})),
        **kwargs,
    )
    launch.start(
        tmp_path / "rendezvous",
        heartbeat=receiver.activity,
        abandon=lambda sid: None,
        data=receiver,
        study_dir=tmp_path / "study",
    )
    return launch, receiver, buffer


def failure(launch: Launcher, timeout: float = 60.0) -> LauncherError:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            launch.check()
        except LauncherError as exc:
            return exc
        time.sleep(0.02)
    raise AssertionError("the study did not fail")


def startup_advice(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The start-up advice said (whatever its fix: it depends on the solver's client)."""
    return [
        one_line(r.getMessage())
        for r in caplog.records
        if "dominates its wall time" in one_line(r.getMessage())
    ]


def run_to_end(launch: Launcher, receiver: Receiver, buffer: FIFOBuffer) -> int:
    """Take the study's samples until its end; stop it. The count of samples."""
    try:
        samples = drain(buffer, timeout=60)
        wait_until(lambda: launch.check() is None and launch.done, "the study")
    finally:
        launch.stop()
        receiver.stop()
    return len(samples)
