"""A study that fails ends the program with one line of what happened and how to go on,
exit code 1, not a traceback through the trainer's and the dataset's internals (a
user's report: ``SourceError: the simulation study failed`` under 15 lines of
`loop.py`, `dataset.py`, `study.py`). A failure with a cause (the user's code failing
in the receiver's thread) keeps its traceback: it is the user's to read."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from failing_source import Failing
from helpers import small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.sources.source import Source, SourceError

SCRIPT = """
import sys, torch
from melissa_trainer import Launcher, LauncherTuning, OnlineTrainer, Study, StreamSource
from melissa_trainer import TrainingArguments

solver = [sys.executable, "-c", "import sys; sys.exit(3)"]  # a solver that always fails
launcher = Launcher(solver, [{"a": float(i)} for i in range(4)], 4, job_limit=4,
                    tuning=LauncherTuning(poll_interval=0.05))
model = torch.nn.Linear(3, 1)
args = TrainingArguments(output_dir=sys.argv[1], report_to="none", disable_progress_bar=True)
trainer = OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), 1e-3),
                        train_source=Study(launcher, StreamSource()))
trainer.train()
"""


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_failed_study_ends_the_program_in_one_line_with_exit_code_1(tmp_path: Path) -> None:
    script = tmp_path / "study.py"
    script.write_text(textwrap.dedent(SCRIPT))
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=150,
        env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("training stopped")]
    assert line.startswith("training stopped at step 0: the simulation study failed: ")
    assert "no checkpoint was written: once the cause is fixed, run it again" in done.stderr


def train(tmp_path: Path, source: Source) -> None:
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, save_steps=1, stop_sync_steps=2, report_to="none",
        disable_progress_bar=True,
    )  # fmt: skip
    model = small_model()
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    OnlineTrainer(model, args, optimizer, train_source=source, process_sample=xy).train()


@pytest.mark.timeout(60)
def test_the_line_names_the_checkpoint_to_resume_and_the_error_is_still_caught(
    tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.ERROR, "melissa_trainer")
    with pytest.raises(SourceError) as info:  # (a SystemExit too: said, uncaught silent)
        train(tmp_path, Failing(None))
    assert isinstance(info.value, SystemExit) and info.value.code == 1
    assert str(info.value) == "the producer failed"
    (message,) = [r.getMessage() for r in caplog.records if "training stopped" in r.getMessage()]
    checkpoint = tmp_path / "out" / "checkpoints" / "checkpoint-2"
    assert message == (
        f"training stopped at step 2: the producer failed; checkpoint {checkpoint} holds "
        "this step: once the cause is fixed, resume with resume_from_checkpoint='latest' "
        "(--resume_from_checkpoint latest on the command line)"
    )


@pytest.mark.timeout(60)
def test_a_failure_with_a_cause_keeps_its_traceback(tmp_path: Path) -> None:
    cause = ValueError("the user's ingest_sample failed")
    with pytest.raises(SourceError) as info:
        train(tmp_path, Failing(cause))
    assert not isinstance(info.value, SystemExit) and info.value.__cause__ is cause
