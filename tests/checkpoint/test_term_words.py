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


def trainer_at(last_save: int | None, step: int, root: Path) -> Any:
    """What `late_end.end_sentence` reads of a trainer (save_at_end off)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        args=SimpleNamespace(save_at_end=False),
        state=SimpleNamespace(last_save_step=last_save, global_step=step),
        checkpoint_root=root,
    )


@pytest.mark.timeout(60)
def test_the_end_sentence_names_the_checkpoint_on_disk_or_why_none(tmp_path: Path) -> None:
    """`late_end.end_sentence`, read once the end's saves are over: the last step's
    checkpoint (a save_steps one, hrev8, or one a hook asked for) named; else none, and
    why: a failed save says it failed (it put `last_save_step` back), never a checkpoint
    that is not on disk (hguess2)."""
    from melissa_trainer.checkpoint.errors import CheckpointSaveError
    from melissa_trainer.trainer.late_end import end_sentence

    resume = "a resume starts from the last one written before, or afresh"
    written = end_sentence(trainer_at(4, 4, tmp_path))
    assert written == f"a checkpoint of the end is on disk: {tmp_path / 'checkpoint-4'}"
    for last in (None, 2):
        assert end_sentence(trainer_at(last, 4, tmp_path)) == (
            f"save_at_end is off: no checkpoint is written at the end ({resume})"
        )
    status = "the signal is not raised again: the exit status is the error's"
    failed = end_sentence(trainer_at(2, 4, tmp_path), CheckpointSaveError("disk full"))
    assert failed == (
        f"no checkpoint of the end is written, its save failed (the error below): {resume}; "
        f"train() raises CheckpointSaveError, {status}"
    )
    other = end_sentence(trainer_at(2, 4, tmp_path), RuntimeError("a hook's"))
    assert other == (
        f"no checkpoint of the end is written, train() failed first (RuntimeError): {resume}; "
        f"train() raises RuntimeError, {status}"
    )
    kept = end_sentence(trainer_at(4, 4, tmp_path), RuntimeError("a hook's"))
    assert kept == (
        f"a checkpoint of the end is on disk: {tmp_path / 'checkpoint-4'}; "
        f"train() raises RuntimeError, {status}"
    )


@pytest.mark.timeout(60)
def test_a_late_line_said_before_the_decision_gets_it_in_a_line_of_its_own(
    caplog: Any,
) -> None:
    """`late_end.EndCheckpoint`: before `decide`, a late line says the end's checkpoint
    is said once decided, and `decide` says it (once: a later call changes nothing);
    after, a late line says the decided sentence itself."""
    from melissa_trainer.trainer.late_end import PENDING, EndCheckpoint

    caplog.set_level(logging.WARNING, logger="melissa_trainer")
    end = EndCheckpoint()
    assert end.clause("SIGTERM") == PENDING
    end.decide("a checkpoint of the end is on disk: /x/checkpoint-4")
    end.decide("no checkpoint is written at the end")  # (the first counts)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["SIGTERM (said above): a checkpoint of the end is on disk: /x/checkpoint-4"]
    assert end.clause("SIGINT") == "; a checkpoint of the end is on disk: /x/checkpoint-4"
    quiet = EndCheckpoint()
    quiet.decide("no checkpoint is written at the end")  # (no line owed: nothing said)
    assert len(caplog.records) == 1
