"""A resumed study's first lines say which simulations are done and which run again
(issue 44): an `OnlineTrainer` on a real `Study` stopped mid-study with a checkpoint,
then resumed; the oracle is which simulations the solver saw run in each run."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from helpers import Keys
from study_runs import study_trainer

from melissa_trainer import OnlineTrainer
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SOLVER = r"""
import json, os, sys
import numpy as np
from melissa_trainer.client import Client

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
with open(os.environ["RUNS"], "a") as f:
    f.write(f"{sid} {attempt}\n")
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(6):
        x = np.array([sid, t, 1.0], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
"""

N = 6


def trainer(tmp_path: Path, run: str, keys: Keys, **args: object) -> OnlineTrainer:
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0)}, seed=3),
        N,
        job_limit=1,  # one after another: which are done at step 13 is known
        backend=LocalBackend(),
        env={"RUNS": str(tmp_path / f"{run}.txt")},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    # (a small buffer: the simulations wait on the trainer)
    return study_trainer(launcher, tmp_path / "out", keys, buffer_size=3, stop_sync_steps=2, **args)


def ran(tmp_path: Path, run: str) -> dict[int, int]:
    """Simulation id -> its first attempt in that run, as the solver saw them."""
    path = tmp_path / f"{run}.txt"
    seen: dict[int, int] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        sid, attempt = map(int, line.split())
        seen.setdefault(sid, attempt)
    return seen


def ids_of(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(", "):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


@pytest.mark.timeout(180)
def test_a_resumed_study_says_first_which_simulations_are_done_and_which_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 13 samples trained and at most 3 + 1 (a put in flight) in the buffer: simulations 0
    # and 1 (6 steps each) are done, 2 has sent 1 to 5 steps when the checkpoint is taken
    trainer(tmp_path, "first", Keys(), max_steps=13, save_at_end=True).train()
    capsys.readouterr()
    trainer(tmp_path, "second", Keys(), resume_from_checkpoint="latest").train()
    out = capsys.readouterr().out.splitlines()
    resumed = next(i for i, line in enumerate(out) if "resumed from" in line)
    line = out[resumed + 1]  # the very next line
    match = re.search(
        r"study resumed: (\d+) of its 6 simulations are done and do not run again"
        r"(?: \(([\d, -]+)\))?; (\d+) run again(?: \(([\d, -]+):[^)]*\))?; (\d+) not started",
        line,
    )
    assert match, line
    done = ids_of(match[2]) if match[2] else set()
    again = ids_of(match[4]) if match[4] else set()
    # the oracle: what the solver saw in the resumed run (an attempt > 0: launched
    # before the checkpoint; 0: first launched now; absent: done)
    second = ran(tmp_path, "second")
    assert done == set(range(N)) - set(second)
    assert again == {sid for sid, attempt in second.items() if attempt > 0}
    assert int(match[1]) == len(done) and int(match[3]) == len(again)
    assert int(match[5]) == sum(attempt == 0 for attempt in second.values())
    assert done and again, "the checkpoint was taken with no simulation done, or in flight"
    # and at its end, the account (printed: not a warning)
    assert (
        "study account: 6 simulations ended, 6 contributed samples; every one contributed." in out
    )
