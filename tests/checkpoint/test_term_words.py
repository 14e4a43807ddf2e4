"""A first SIGTERM's line says how to resume should the process be killed before the
stop's checkpoint is written (`trainer.term_words`): Slurm's SIGKILL, ``KillWait``
after its SIGTERM, cut a trainer's stop short in a user trial (an ``sbatch
--no-requeue`` trainer whose allocation lost a node:
tests/launcher/backends/test_slurm_srun_sbatch_requeue.py), and the log's last line,
this one, said nothing of it. Failed before: the line ended at "to exit at once without
one)"."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples
from preemption_runs import make_trainer
from test_preemption_trainer import SignalAt

from melissa_trainer import Preempted


@pytest.mark.timeout(60)
def test_a_sigterm_names_the_latest_checkpoint_and_the_resume_flag(
    tmp_path: Path, caplog: Any
) -> None:
    out = tmp_path / "out"
    caplog.set_level(logging.WARNING, logger="melissa_trainer")
    trainer = make_trainer(out, list(linear_samples(400)), [SignalAt(5)], save_steps=4)
    with pytest.raises(Preempted, match="preempted by SIGTERM at step"):
        trainer.train()
    line = next(r.getMessage() for r in caplog.records if "SIGTERM received" in r.getMessage())
    # (the checkpoint on disk as the signal came: step 4's, the stop's own came after)
    latest = out / "checkpoints" / "checkpoint-4"
    assert (
        f"killed before it is written (a SIGKILL: Slurm's, KillWait after its SIGTERM), "
        f"resume from {latest} with resume_from_checkpoint='latest'" in line
    ), line


@pytest.mark.timeout(60)
def test_a_sigterm_before_any_checkpoint_says_the_run_starts_again(
    tmp_path: Path, caplog: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer")
    trainer = make_trainer(tmp_path / "out", list(linear_samples(400)), [SignalAt(2)])
    with pytest.raises(Preempted, match="preempted by SIGTERM at step"):
        trainer.train()
    line = next(r.getMessage() for r in caplog.records if "SIGTERM received" in r.getMessage())
    assert line.endswith(
        "killed before it is written: no checkpoint is on disk yet, run it again"
    ), line
