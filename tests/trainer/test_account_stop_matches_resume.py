"""A study stopped with a checkpoint says, at its stop, what a run resumed from that
checkpoint will do, and the resumed run then says the same (`study.saved_account`): an
`OnlineTrainer` on a real `Study`, stopped mid-study, then resumed; the oracle is the
resume's own first line (itself checked against what the solver saw run, in
tests/trainer/test_study_resume_report.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from study_runs import study_trainer

from melissa_trainer import OnlineTrainer
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SOLVER = r"""
import os
import numpy as np
from melissa_trainer.client import Client

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
with Client({"x": ((3,), "float32"), "y": ((1,), "float32")}) as client:
    for t in range(6):
        x = np.array([sid, t, 1.0], np.float32)
        client.send(t, x=x, y=np.array([x.sum()], np.float32))
"""

N = 6


def trainer(tmp_path: Path, **args: object) -> OnlineTrainer:
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(script)],
        UniformSampler({"a": (0.0, 1.0)}, seed=3),
        N,
        job_limit=1,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0),
    )
    torch.manual_seed(0)
    return study_trainer(launcher, tmp_path / "out", buffer_size=3, stop_sync_steps=2, **args)


@pytest.mark.timeout(180)
def test_the_stops_words_on_the_resume_are_the_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trainer(tmp_path, max_steps=13, save_at_end=True).train()
    first = capsys.readouterr().out.splitlines()
    checkpoint = tmp_path / "out" / "checkpoints" / "checkpoint-13"
    said = [line for line in first if line.startswith(f"a run resumed from {checkpoint}: ")]
    assert len(said) == 1, [line for line in first if "run again" in line]
    trainer(tmp_path, resume_from_checkpoint="latest").train()
    out = capsys.readouterr().out.splitlines()
    resumed = next(i for i, line in enumerate(out) if "resumed from" in line)
    line = re.sub(r"^step \d+ \| ", "", out[resumed + 1])
    assert line.startswith("study resumed: "), line
    assert said[0].split(": ", 1)[1] == line.split(": ", 1)[1]
    assert "run again (" in line  # (the checkpoint was taken with a simulation in flight)
