"""The final log of a study whose stream ended tells the study's end: the launcher has
seen every simulation's exit, so its figures agree with the receivers'.

A user trial's heat run ended with ``launcher_finished 9 | launcher_running 1 |
simulations_finished 10``: the final log was taken at LOOP_END, while the last
simulation, its data all in, was still exiting, and only `source.stop()` waited for the
launcher to see it end. The study now waits for those exits at LOOP_END (bounded by
`STOP_WAIT`, which `stop` no longer adds to), before the final log and checkpoint.
Here each simulation lingers after its last send (a solver writing its own output), so
that the final log, on the code before, came while the last one still ran.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.hooks import Hook
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.study.closing import LastExits
from melissa_trainer.study.study_stop import STOP_WAIT

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: seconds each simulation lives on after its last send (its client closed)
LINGER = 1.5

SIMULATION = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client

options = json.loads(os.environ["SIM_OPTIONS"])
params = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(options["steps"]):
        x = np.array([params["a"], params["b"], t / 10], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
time.sleep(options["linger"])  # the solver's own output, after its data is all sent
"""


def timed(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[float]:
    """The seconds each call of ``cls.name`` takes from now, in the list returned."""
    seconds: list[float] = []
    method = getattr(cls, name)

    def timing(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return method(self, *args, **kwargs)
        finally:
            seconds.append(time.monotonic() - started)

    monkeypatch.setattr(cls, name, timing)
    return seconds


class SourceAt(Hook):
    """Records the source's figures each hook sees at LOOP_END: the source still runs."""

    def __init__(self) -> None:
        self.at_loop_end: dict[str, float] = {}

    def on_loop_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.at_loop_end = trainer.source.telemetry()


@pytest.mark.timeout(120)
def test_the_final_log_has_every_simulation_finished_for_the_launcher_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 3
    script = tmp_path / "sim.py"
    script.write_text(SIMULATION)
    launcher = Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0), "b": (-1.0, 1.0)}, seed=3),
        n,
        job_limit=n,  # all at once: the last data and the last exits come together
        backend=LocalBackend(),
        env={"SIM_OPTIONS": json.dumps({"steps": 8, "linger": LINGER})},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    hook = SourceAt()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=1,
            buffer="fifo",
            buffer_size=64,
            logging_steps=1000,  # the final log only
            disable_progress_bar=True,
            report_to="tensorboard",
            stop_sync_steps=2,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=Keys(),
        hooks=[hook],
    )
    waits, stops = timed(monkeypatch, LastExits, "wait"), timed(monkeypatch, LastExits, "stop")
    state = trainer.train()
    assert state.stream_ended
    final = state.log_history[-1]
    figures = {k: final[f"source_{k}"] for k in ("simulations_finished", "launcher_finished")}
    figures.update(
        {k: final.get(f"source_{k}", 0.0) for k in ("launcher_running", "launcher_exited")}
    )
    assert figures == {
        "simulations_finished": n,
        "launcher_finished": n,
        "launcher_running": 0,
        "launcher_exited": 0,
    }, final
    # the hooks' on_loop_end (after the study's) saw a running source, its exits seen
    assert hook.at_loop_end["launcher_finished"] == n, hook.at_loop_end
    # TensorBoard's last points are the same figures
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "out" / "runs"), size_guidance={"scalars": 0})
    events.Reload()
    last = {
        tag: events.Scalars(tag)[-1].value
        for tag in ("source/simulations_finished", "source/launcher_finished")
    }
    assert last == {"source/simulations_finished": n, "source/launcher_finished": n}, last
    # the final checkpoint (after the final log) has every simulation finished
    saved = tmp_path / "out" / "checkpoints" / f"checkpoint-{state.global_step}"
    record = json.loads((saved / "rank_0" / "source.json").read_text())["launcher"]
    assert {r["status"] for r in records_of(record).values()} == {"finished"}
    # one wait for the last exits, not one at LOOP_END and another at stop: the time in
    # the two (not the whole run's: the simulations' start-up was 14 s at load 15)
    assert waits and stops and sum(waits + stops) < LINGER + STOP_WAIT, (waits, stops)
