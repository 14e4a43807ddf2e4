"""A study that fails after some training, under a real launcher and trainer: the
trainer writes a checkpoint of the step it stopped at (none was due: save_seconds=600),
the exit status stays non-zero (SourceError, a SystemExit with code 1), and the line
says where the checkpoint is and what a resume does. Then what it promises is what a
resume does: the simulation given up does not run again, the one the failure
interrupted does, and one more failing for good fails the study again (a user trial: a
study failed at step 288 with "no checkpoint was written", 10 minutes of training lost).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from study_runs import study_trainer

from melissa_trainer import OnlineTrainer
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.hooks import Hook
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend
from melissa_trainer.sources.source import SourceError
from melissa_trainer.study.progress_words import RESUME_NOTE

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: each launch appends its id to LAUNCHES. Simulation 0 sends 4 steps and exits 0;
#: simulation 1 waits until the trainer has trained 4 steps (FLAG), then exits 1 (the
#: study fails: on_failure="raise"); simulation 2 waits to be killed by the study's stop
#: in the first run, and exits 1 at once in a resumed one (RESUMED)
SOLVER = r"""
import os, sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
with open(os.environ["LAUNCHES"], "a") as f:
    f.write(f"{sid}\n")
if sid == 1:
    while not Path(os.environ["FLAG"]).exists():
        time.sleep(0.05)
    sys.exit(1)
if sid == 2:
    if os.environ.get("RESUMED"):
        sys.exit(1)
    time.sleep(3600)
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(4):
        x = np.array([sid, t, 1.0], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
"""


class Flag(Hook):
    """Writes `path` once 4 steps are trained: simulation 1 fails from then on."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step >= 4 and not self.path.exists():
            self.path.write_text("")


def run(tmp_path: Path, resumed: bool) -> OnlineTrainer:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    env = {"FLAG": str(tmp_path / "flag"), "LAUNCHES": str(tmp_path / "launches")}
    launcher = Launcher(
        [sys.executable, str(tmp_path / "solver.py")],
        [{"a": 0.1}, {"a": 0.7}, {"a": 0.2}],
        3,
        job_limit=3,
        backend=LocalBackend(),
        env={**env, "RESUMED": "1"} if resumed else env,
        tuning=LauncherTuning(
            poll_interval=0.05, kill_grace=2.0, max_restarts=0, on_failure="raise"
        ),
    )
    return study_trainer(
        launcher, tmp_path / "out", hooks=[Flag(tmp_path / "flag")], watermark=1,
        stop_sync_steps=1, resume_from_checkpoint="latest" if resumed else None,
    )  # fmt: skip


@pytest.mark.timeout(240)
def test_a_failed_study_keeps_its_training_and_a_resume_does_what_the_line_says(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="melissa_trainer")
    (tmp_path / "solver.py").write_text(SOLVER)
    first = run(tmp_path, resumed=False)
    with pytest.raises(SourceError) as info:
        first.train()
    assert isinstance(info.value, SystemExit) and info.value.code == 1  # never exit 0
    step = first.state.global_step
    assert step >= 4
    checkpoint = ckpt.checkpoint_path(first.checkpoint_root, step)
    assert ckpt.latest_checkpoint(first.checkpoint_root) == checkpoint
    (line,) = [r.getMessage() for r in caplog.records if "training stopped" in r.getMessage()]
    assert line.startswith(f"training stopped at step {step}: the simulation study failed: ")
    assert f"\ncheckpoint {checkpoint} holds this step: once the cause is fixed, resume" in line
    assert line.endswith(RESUME_NOTE)
    launched = (tmp_path / "launches").read_text().split()
    assert sorted(launched) == ["0", "1", "2"] or sorted(launched) == ["0", "1"]

    caplog.clear()
    resumed = run(tmp_path, resumed=True)
    with pytest.raises(
        SourceError, match="the simulation study failed: simulation 2 failed once"
    ):  # simulation 2 fails for good: the study fails again
        resumed.train()
    again = (tmp_path / "launches").read_text().split()[len(launched) :]
    assert again == ["2"]  # 1, given up, does not run again; 2, interrupted, does
    assert resumed.state.global_step == step  # (from the checkpoint of the failure)
    (line,) = [r.getMessage() for r in caplog.records if "training stopped" in r.getMessage()]
    assert "simulation 2 failed once" in line and line.endswith(RESUME_NOTE), line
