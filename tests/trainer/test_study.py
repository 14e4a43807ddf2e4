"""A study end to end: `OnlineTrainer` + `Study(Launcher(...), StreamSource(...))`.

Rank 0's study starts the launcher once its receiver is up; simulations are real
processes streaming with `melissa_trainer.client.Client` configured only by the
launcher's environment variables. Restarts, abandoned and failed simulations, the
launcher's telemetry and its state in checkpoints are checked through the trainer.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import HeldIdleClock, Keys

import melissa_trainer.study.study
from melissa_trainer import (
    OnlineTrainer,
    ReceiverConfig,
    SourceError,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import (
    Launcher,
    LauncherTuning,
    LocalBackend,
    UniformSampler,
    data_watch,
)
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.stream import watchdog
from melissa_trainer.study import starvation

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SIMULATION = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client

options = json.loads(os.environ["SIM_OPTIONS"])
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
with open(os.path.join(options["pids"], f"{os.getpid()}"), "w"):
    pass
if sid in options.get("fail", []) or options.get("fail_all"):
    print(f"solver {sid}: ImportError: no module named 'mysolver'", file=sys.stderr)
    sys.exit(3)
wide = sid in options.get("wide", [])  # declares x of 4 values, not 3
n = 4 if wide else 3
given = {} if sid in options.get("no_parameters", []) else params  # started "by hand"
with Client({"x": ((n,), "float32"), "y": ((1,), "float32")}, parameters=given) as client:
    for t in range(options["steps"]):
        if attempt == 0 and sid in options.get("crash", []) and t == options["steps"] // 2:
            client.close(bye=False)
            sys.exit(1)
        if sid in options.get("hang", []) and t == 2:
            time.sleep(3600)  # silent, alive
        x = np.array([params["a"], params["b"], t / 10, 0.0][:n], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
    if sid in options.get("no_bye", []):
        client.close(bye=False)  # exits 0 without saying it finished
        if wide:
            time.sleep(0.2)  # still running when it is refused
"""


def study(tmp_path: Path, n: int, options: dict[str, Any], **tuning: Any) -> Launcher:
    """A launcher of `n` simulations running SIMULATION with `options`, polling fast;
    `tuning`: more `LauncherTuning` fields."""
    script = tmp_path / "sim.py"
    script.write_text(SIMULATION)
    (tmp_path / "pids").mkdir()
    options = dict(options, pids=str(tmp_path / "pids"))
    return Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        n,
        job_limit=2,
        backend=LocalBackend(),
        env={"SIM_OPTIONS": json.dumps(options)},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, **tuning),
    )


def trainer(
    tmp_path: Path,
    launcher: Launcher,
    keys: Keys,
    source: dict[str, Any] | None = None,
    **args: Any,
) -> OnlineTrainer:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    return OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",  # each sample once: the counts below rely on it
            buffer_size=64,
            logging_steps=5,
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=2,
            **args,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig(**(source or {})))),
        process_sample=keys,
    )


@pytest.mark.timeout(120)
def test_a_study_trains_on_every_step_of_every_simulation_once(tmp_path: Path) -> None:
    launcher, keys = study(tmp_path, 4, {"steps": 12, "crash": [1]}, max_restarts=1), Keys()
    t = trainer(tmp_path, launcher, keys, save_at_end=True)
    t.train()
    assert sorted(keys.seen) == [(s, k) for s in range(4) for k in range(12)]
    summary = launcher.summary()
    assert (summary["finished"], summary["restarts"], summary["running"]) == (4, 1, 0)
    tel = t.source.telemetry()
    assert tel["samples_put"] == 48 and tel["simulations_finished"] == 4
    assert tel["launcher_finished"] == 4 and tel["launcher_restarts"] == 1
    out = tmp_path / "out"
    assert (out / "rendezvous" / "rank_0.json").exists()
    assert (out / "study" / "logs" / "sim-1.log").exists()
    state = json.loads(
        (
            out / "checkpoints" / f"checkpoint-{t.state.global_step}" / "rank_0" / "source.json"
        ).read_text()
    )
    # The final checkpoint is written before the source stops: a simulation whose data
    # all arrived may still be exiting then ("running" for the launcher if its tick has
    # not read the receiver's report yet, "complete" if it has), but the receiver's
    # record beside it has every simulation finished.
    records = records_of(state["launcher"])
    assert {r["status"] for r in records.values()} <= {"finished", "complete", "running"}
    assert sorted(int(k) for k in records) == [0, 1, 2, 3]
    assert [state["simulations"][str(s)]["finished"] for s in range(4)] == [True] * 4


@pytest.mark.timeout(120)
def test_an_abandoned_simulation_ends_the_stream_without_it(tmp_path: Path) -> None:
    launcher, keys = (
        study(tmp_path, 3, {"steps": 5, "fail": [1]}, max_restarts=1, on_failure="abandon"),
        Keys(),
    )
    t = trainer(tmp_path, launcher, keys)
    t.train()  # returns: the receiver was told not to wait for simulation 1
    assert sorted(keys.seen) == [(s, k) for s in (0, 2) for k in range(5)]
    tel = t.source.telemetry()
    assert tel["simulations_abandoned"] == 1 and tel["simulations_finished"] == 2
    assert tel["launcher_abandoned"] == 1


@pytest.mark.timeout(120)
def test_a_study_that_fails_stops_training_with_a_clear_error(tmp_path: Path) -> None:
    launcher, keys = (
        study(tmp_path, 3, {"steps": 200, "fail": [0]}, max_restarts=1, on_failure="raise"),
        Keys(),
    )
    t = trainer(tmp_path, launcher, keys)
    with pytest.raises(SourceError, match="simulation 0"):
        t.train()
    # stopped with the source: no simulation left running (the record keeps "running"
    # for those it killed, so that a resume relaunches them)
    pids = [int(p.name) for p in (tmp_path / "pids").iterdir()]
    assert len(pids) >= 3 and not [pid for pid in pids if alive(pid)]


@pytest.mark.timeout(120)
def test_a_redrawn_simulations_replacement_streams_every_step(tmp_path: Path) -> None:
    """Simulation 1 always fails; with max_restarts=0 it is redrawn as 4, whose every
    step reaches training (it was dropped as 'ignored_after_end': the receivers
    counted the redrawn simulation as ended, and the stream ended one short)."""
    launcher = study(tmp_path, 4, {"steps": 20, "fail": [1]}, max_restarts=0)
    keys = Keys()
    t = trainer(tmp_path, launcher, keys)
    t.train()
    assert sorted(keys.seen) == [(s, k) for s in (0, 2, 3, 4) for k in range(20)]
    tel = t.source.telemetry()
    assert tel["ignored_after_end"] == 0 and tel["simulations_finished"] == 4
    summary = launcher.summary()
    assert (summary["finished"], summary["failed"], summary["redraws"]) == (4, 1, 1)


@pytest.mark.timeout(120)
def test_a_study_where_every_simulation_fails_raises_with_a_summary(tmp_path: Path) -> None:
    """A solver that fails at import (a venv not activated): the study stops with an
    error that lists the failures and the last lines of their logs (it ended the stream
    at step 0 and reported success)."""
    launcher = study(tmp_path, 4, {"steps": 5, "fail_all": True}, max_restarts=1)
    keys = Keys()
    t = trainer(tmp_path, launcher, keys)
    with pytest.raises(SourceError) as info:
        t.train()
    message = str(info.value)
    assert "failed for good" in message and "min_finished_fraction=0.5" in message
    assert "0 finished" in message and "exit codes [3, 3]" in message
    assert "ImportError: no module named 'mysolver'" in message  # the log's tail
    assert t.state.global_step == 0 and keys.seen == []


@pytest.mark.timeout(120)
def test_a_simulation_declaring_other_fields_is_refused_at_hello(tmp_path: Path) -> None:
    launcher = study(tmp_path, 3, {"steps": 10, "wide": [1]}, max_restarts=0)
    keys = Keys()
    fields = {"x": ((3,), "float32"), "y": ((1,), "float32")}
    t = trainer(tmp_path, launcher, keys, source={"fields": fields})
    t.train()
    assert sorted(keys.seen) == [(s, k) for s in (0, 2, 3) for k in range(10)]
    record = records_of(launcher.state_dict())[1]
    assert record["status"] == "failed"
    assert record["exit_codes"][0] in ("refused", "incomplete")
    assert "field 'x' is float32 (4,) where the study's is float32 (3,)" in record["reason"]
    assert t.source.telemetry()["rejected_schema_mismatch"] >= 1


@pytest.mark.timeout(120)
def test_a_simulation_without_its_parameters_is_refused_at_hello_naming_the_fix(
    tmp_path: Path,
) -> None:
    launcher = study(tmp_path, 3, {"steps": 10, "no_parameters": [1]}, max_restarts=0)
    keys = Keys()
    t = trainer(tmp_path, launcher, keys)
    assert t.source.stream.config.parameters == ("a", "b")  # the sampler's, by the Study
    t.train()
    assert sorted(keys.seen) == [(s, k) for s in (0, 2, 3) for k in range(10)]
    record = records_of(launcher.state_dict())[1]
    assert record["status"] == "failed" and record["exit_codes"][0] in ("refused", "incomplete")
    assert (
        "HELLO carries no parameters, the study's simulations have ['a', 'b']" in record["reason"]
    )
    assert "MELISSA_TRAINER_PARAMETERS=" in record["reason"]
    assert t.source.telemetry()["rejected_schema_mismatch"] >= 1


@pytest.mark.timeout(120)
def test_a_silent_simulation_without_timeout_stops_training_with_the_watchdogs_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulation 1 sends 2 steps and hangs: once 0 and 2 have finished, the stream is
    silent for `stall_timeout` (2 s) and the error names 1 and what it has. The idle
    clock counts from that moment (`HeldIdleClock`): counted from the receiver's start,
    the simulations' start-up on a loaded machine was a stall of its own."""
    launcher = study(tmp_path, 3, {"steps": 6, "hang": [1]}, max_restarts=0)
    keys = Keys()
    t = trainer(tmp_path, launcher, keys, source={"stall_timeout": 2.0})

    def can_stall() -> bool:  # 0 and 2 finished, 1's two steps in: only 1 is awaited
        receiver = t.source.stream.receiver  # type: ignore[attr-defined]
        return (
            receiver is not None
            and len(receiver.completed()) == 2
            and receiver.activity().get(1, 0) >= 2
        )

    held = HeldIdleClock(can_stall)
    monkeypatch.setattr(watchdog, "time", held)
    # and rank 0's starvation watch, on the same held clock: on its own (the real one) it
    # failed first, with its own words, while simulation 2 was still starting (at load
    # 18): the receiver's clock held reads as no silence there, so it did not defer
    held_watch = functools.partial(starvation.StarvationWatch, clock=held.monotonic)
    monkeypatch.setattr(starvation, "StarvationWatch", held_watch)
    with pytest.raises(SourceError) as info:
        t.train()
    message = str(info.value)
    assert "stall_timeout=2.0" in message and "simulation 1:" in message
    # what it has of simulation 1 (how many steps it sends: only its BYE would say)
    assert "has 2 of an unannounced number of steps, BYE from 0 of 1" in message
    assert "StallError" not in message  # the error's own words, not its repr
    pids = [int(p.name) for p in (tmp_path / "pids").iterdir()]
    assert not [pid for pid in pids if alive(pid)]  # the hung solver was killed


@pytest.mark.timeout(120)
def test_an_exit_0_without_all_its_data_is_a_failed_attempt_not_a_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulation 1 exits 0 without its BYE: the receiver can never know it finished.
    It is restarted, then redrawn; the study ends with three finished simulations."""
    # Its two attempts each wait DRAIN_GRACE (2 s) after their exit; 0.5 s is as good
    # a grace here: a solver that closes its client has delivered its BYE before it exits
    # (and the receiver must also be idle for IDLE_GRACE, 1 s, unchanged)
    monkeypatch.setattr(data_watch, "DRAIN_GRACE", 0.5)
    launcher = study(tmp_path, 3, {"steps": 5, "no_bye": [1]}, max_restarts=1)
    keys = Keys()
    t = trainer(tmp_path, launcher, keys)
    t.train()
    record = records_of(launcher.state_dict())[1]
    assert record["status"] == "failed" and record["exit_codes"] == ["incomplete"] * 2
    assert "BYE from 0 of 1 client ranks" in record["reason"]
    assert {s for s, _ in keys.seen} == {0, 1, 2, 3}  # 1's data arrived, once
    assert sorted(k for k in keys.seen if k[0] != 1) == [
        (s, k) for s in (0, 2, 3) for k in range(5)
    ]
    summary = launcher.summary()
    assert (summary["finished"], summary["failed"], summary["restarts"]) == (3, 1, 1)


@pytest.mark.timeout(120)
def test_a_stream_waiting_after_every_simulation_ended_stops_with_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receivers expect five simulations, the launcher runs three: once all three
    have ended and nothing arrives, rank 0 says so instead of waiting forever."""
    # ENDED_GRACE: how long the receiver must be silent after the study's end (5 s);
    # 1 s here: the three simulations' data has all arrived by then
    monkeypatch.setattr(melissa_trainer.study.study, "ENDED_GRACE", 1.0)
    launcher = study(tmp_path, 3, {"steps": 4})
    keys = Keys()
    t = trainer(tmp_path, launcher, keys, source={"expected_simulations": 5})
    with pytest.raises(SourceError) as info:
        t.train()
    message = str(info.value)
    assert "every simulation of the study has ended" in message
    assert "3 of 5 expected simulations finished" in message
    assert sorted(keys.seen) == [(s, k) for s in range(3) for k in range(4)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
