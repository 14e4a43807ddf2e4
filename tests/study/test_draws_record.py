"""A study with active sampling records each draw in ``{output_dir}/study/draws.csv``
(`launcher.draw_log`): the parameters each simulation received, whether it was explored
or bred and from which parent, and the losses the sampler observed; the end-of-run
account names the file.

Before: nothing told a user what the sampler drew (the account gave counts only, the
study folder held only the logs).

A real study under an `OnlineTrainer` (simulations started by the local backend,
streaming to the receiver). The oracles are independent of the file: the parameters
each solver wrote down as it received them, the sampler's own counts and observations,
and the account line's counts.
"""

from __future__ import annotations

import csv
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import Keys

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend
from melissa_trainer.launcher.breed import BreedSampler

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

# each simulation writes down the parameters it received (the oracle), then streams
SOLVER = r"""
import json, os, sys
import numpy as np
from melissa_trainer.client import Client

with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    sid = os.environ["MELISSA_TRAINER_SIMULATION_ID"]
    with open(os.path.join(sys.argv[1], f"received-{sid}.json"), "w") as out:
        json.dump(client.parameters, out)
    a, b = client.parameters["a"], client.parameters["b"]
    for t in range(2):
        client.send(t, x=np.array([a, b, t], np.float32), y=np.array([a * b], np.float32))
"""


def run_study(tmp_path: Path, sampler: BreedSampler, n: int) -> None:
    """Train on a study of `n` simulations, one at a time, drawn by `sampler`, with a
    loss reduction every step (so that most draws can breed)."""
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(script), str(tmp_path)],
        sampler,
        n,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    options: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "buffer": "fifo",
        "buffer_size": 2,
        "watermark": 1,
        "batch_size": 1,
        "simulation_loss_steps": 1,
        "logging_steps": 100,
        "disable_progress_bar": True,
        "report_to": "none",
        "save_at_end": False,
    }
    OnlineTrainer(
        model,
        TrainingArguments(**options),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=Keys(),
    ).train()


@pytest.mark.timeout(180)
def test_a_breed_study_records_each_draw_its_kind_its_parent_and_its_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer")
    sampler = BreedSampler(
        {"a": (0.0, 1.0), "b": (1.0, 100.0, "log")}, seed=0, exploration=0.3, min_observations=1
    )
    run_study(tmp_path, sampler, 12)
    path = tmp_path / "out" / "study" / "draws.csv"
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert list(rows[0]) == ["simulation_id", "event", "a", "b", "drawn", "parent", "loss"]
    draws = [r for r in rows if r["event"] == "draw"]
    # one draw row per simulation, with the parameters the simulation itself received
    assert [int(r["simulation_id"]) for r in draws] == list(range(12))
    for row in draws:
        received = json.loads((tmp_path / f"received-{row['simulation_id']}.json").read_text())
        assert {"a": float(row["a"]), "b": float(row["b"])} == received, row
    # explored and bred as the sampler counted them, and as the account line says
    kinds = [r["drawn"] for r in draws]
    assert kinds.count("explored") == sampler.explored
    assert kinds.count("bred") == 12 - sampler.explored > 0, kinds
    (line,) = [
        x for r in caplog.records for x in r.getMessage().splitlines() if "adaptive sampler:" in x
    ]
    counts = re.search(r"of 12 draws, (\d+) explored, (\d+) bred", line)
    assert counts is not None, line
    assert (int(counts[1]), int(counts[2])) == (kinds.count("explored"), kinds.count("bred"))
    assert str(path) in line, line
    # a bred draw names an earlier simulation as its parent, whose loss it had observed
    seen: set[int] = set()
    for row in rows:
        sid = int(row["simulation_id"])
        if row["event"] == "loss":
            seen.add(sid)
        elif row["drawn"] == "bred":
            assert int(row["parent"]) in seen and int(row["parent"]) < sid, row
        else:
            assert row["parent"] == "", row
    # every row repeats its simulation's draw
    by_id = {int(r["simulation_id"]): r for r in draws}
    for row in rows:
        draw = by_id[int(row["simulation_id"])]
        assert [row[k] for k in ("a", "b", "drawn", "parent")] == [
            draw[k] for k in ("a", "b", "drawn", "parent")
        ]
    # within LOSS_CHANGE (10%) of the last the sampler observed: a loss row is written
    # when it moved by more than that (`loss_rows.loss_changed`), each one from the last
    last: dict[int, float] = {}
    for r in rows:
        if r["event"] == "loss":
            sid, loss = int(r["simulation_id"]), float(r["loss"])
            assert sid not in last or abs(loss - last[sid]) > 0.1 * abs(last[sid]), r
            last[sid] = loss
    observed = {o.simulation_id: o.loss for o in sampler.observations}
    assert set(last) == set(observed)
    assert all(abs(observed[s] - last[s]) <= 0.1 * abs(last[s]) for s in last), (last, observed)
    assert all(r["loss"] == "" for r in draws)
