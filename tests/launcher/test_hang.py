"""A hung simulation is found in minutes and named: by default (`simulation_timeout`
``"auto"``) a simulation silent for `silence_factor` times the longest silence the study
has seen between two messages (at least `silence_floor`) is killed, named in the log
with its id, attempt, parameters and log file, and handled as a failed attempt; the
study completes. A simulation that never said HELLO is named, with its log, when the
stream stalls.

The trainer runs in the test's process (as in `tests/trainer/test_study.py`); the simulations are
real processes streaming with `melissa_trainer.client.Client`.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import HeldIdleClock, Keys

from melissa_trainer import (
    OnlineTrainer,
    ReceiverConfig,
    SourceError,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.stream import watchdog
from melissa_trainer.study import starvation

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SIMULATION = r"""
import json, os, time
import numpy as np
from melissa_trainer.client import Client

options = json.loads(os.environ["SIM_OPTIONS"])
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = os.environ["MELISSA_TRAINER_ATTEMPT"]
with open(os.path.join(options["pids"], f"{sid}-{attempt}"), "w") as f:
    f.write(str(os.getpid()))
if sid in options.get("no_hello", []):
    time.sleep(3600)  # alive, silent, never connects
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(options["steps"]):
        if t == options.get("hang_at") and sid in options.get("hang", []):
            time.sleep(3600)  # alive, silent, mid-run
        x = np.array([sid, t, 0.5], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
        time.sleep(options.get("delay", 0.0))
time.sleep(options.get("linger", 0.0))  # after its client's close: writing its own output
"""


def run(
    tmp_path: Path, n: int, options: dict[str, Any], stall_timeout: float, **tuning: Any
) -> tuple[Launcher, OnlineTrainer, Keys]:
    script = tmp_path / "sim.py"
    script.write_text(SIMULATION)
    (tmp_path / "pids").mkdir()
    launcher = Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0)}, seed=3),
        n,
        job_limit=2,
        backend=LocalBackend(),
        env={"SIM_OPTIONS": json.dumps(dict(options, pids=str(tmp_path / "pids")))},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=1.0, **tuning),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    keys = Keys()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",  # each sample once: the exactly-once oracle
            buffer_size=64,
            disable_progress_bar=True,
            report_to="none",
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig(stall_timeout=stall_timeout))),
        process_sample=keys,
    )
    return launcher, trainer, keys


@pytest.mark.timeout(120)
def test_a_hung_simulation_is_found_by_the_derived_timeout_killed_named_and_redrawn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Steps come every 0.1 s; simulation 1 stops sending at step 3 and stays alive.
    With the floor at 1 s, "auto" kills it after about 1 s of silence (10 x 0.1 s),
    long before the stream's stall watchdog (15 s here) would fail the study; with
    `max_restarts` 0 it is redrawn, and the study completes with three simulations."""
    launcher, trainer, keys = run(
        tmp_path,
        3,
        {"steps": 6, "delay": 0.1, "hang": [1], "hang_at": 3},
        stall_timeout=15.0,
        silence_floor=1.0,
        max_restarts=0,
    )
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher"):
        trainer.train()
    log = tmp_path / "out" / "study" / "logs" / "sim-1.log"
    killed = [r.getMessage() for r in caplog.records if "silent for" in r.getMessage()]
    assert len(killed) == 1, killed
    assert killed[0].startswith("simulation 1 (attempt 0, parameters {'a': ")
    assert "since its last message; simulation_timeout='auto': max(silence_floor=1.0" in killed[0]
    assert killed[0].endswith(f"; log: {log}")
    record = records_of(launcher.state_dict())[1]
    assert (record["status"], record["exit_codes"]) == ("failed", ["timeout"])
    pid = int((tmp_path / "pids" / "1-0").read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    finished = sorted(
        s for s, r in records_of(launcher.state_dict()).items() if r["status"] == "finished"
    )
    assert len(finished) == 3 and 1 not in finished  # the replacement, 3, finished
    trained = sorted(k for k in keys.seen if k[0] != 1)
    assert trained == [(s, t) for s in finished for t in range(6)]  # each once
    assert sorted(k for k in keys.seen if k[0] == 1) == [(1, t) for t in range(3)]


@pytest.mark.timeout(120)
def test_a_simulation_ending_after_its_last_step_is_not_taken_for_a_hung_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each simulation sends its 4 steps 0.05 s apart, closes its client and then spends
    6 s writing its own output before it exits 0. With the floor at 2 s (and factor 2),
    the bound between two messages is about 2 s, but its data is complete: what is left
    is its exit, bounded as a start-up is (600 s). It was killed as silent ("timeout"),
    as a busy node's slow interpreter exit was (1.8 s at load 12, floor 1 s), which cut
    its own output short."""
    launcher, trainer, keys = run(
        tmp_path,
        2,
        {"steps": 4, "delay": 0.05, "linger": 6.0},
        stall_timeout=30.0,
        silence_floor=2.0,
        silence_factor=2.0,
    )
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher"):
        trainer.train()
    killed = [r.getMessage() for r in caplog.records if "silent for" in r.getMessage()]
    assert killed == []
    records = records_of(launcher.state_dict())
    assert {s: (r["status"], r["exit_codes"]) for s, r in records.items()} == {
        0: ("finished", [0]),
        1: ("finished", [0]),
    }
    assert sorted(keys.seen) == [(s, t) for s in (0, 1) for t in range(4)]


@pytest.mark.timeout(120)
def test_a_simulation_that_never_said_hello_is_named_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulation 1 starts and never connects; the stream stalls once 0 and 2 are done:
    the error names it, its attempt and its log (not only 'simulations that never said
    HELLO'). The idle clock counts from then (`HeldIdleClock`): counted from the
    receiver's start, the start-up of 0, or of 2 after 0 (2 jobs at a time), on a
    loaded machine was a stall of its own, before 0 and 2 had sent their steps.
    `startup_timeout=None`: a start-up with no bound is not a silence the launcher
    explains (with the default 600 s, the watchdog would wait for it:
    `tests/trainer/test_study_silence.py`)."""
    launcher, trainer, keys = run(
        tmp_path, 3, {"steps": 4, "no_hello": [1]}, stall_timeout=2.0, startup_timeout=None
    )
    study = trainer.source

    def can_stall() -> bool:  # 0 and 2 finished: only 1 is awaited
        receiver = study.stream.receiver  # type: ignore[attr-defined]
        return receiver is not None and len(receiver.completed()) == 2

    held = HeldIdleClock(can_stall)
    monkeypatch.setattr(watchdog, "time", held)
    # rank 0's starvation watch on the same held clock (as in tests/trainer/test_study.py:
    # on the real one it may fail first, in its own words, while a start-up is slow)
    held_watch = functools.partial(starvation.StarvationWatch, clock=held.monotonic)
    monkeypatch.setattr(starvation, "StarvationWatch", held_watch)
    with pytest.raises(SourceError) as info:
        trainer.train()
    message = str(info.value)
    assert "stall_timeout=2.0" in message and "never said HELLO" in message
    log = tmp_path / "out" / "study" / "logs" / "sim-1.log"
    assert (
        "running: simulation 1 (attempt 0, parameters {'a': " in message
        and "no message received yet, silent " in message
        and f"); log: {log}" in message
    ), message
    assert sorted(keys.seen) == [(s, t) for s in (0, 2) for t in range(4)]
