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


def test_a_late_signal_says_no_end_checkpoint_only_where_none_comes() -> None:
    """`no_end_checkpoint`: nothing with save_at_end (the end's checkpoint comes) or once
    the last step's checkpoint is written or asked for (`end_saved`); else none at the
    end, or none unless the timed save is due (the end saves when either asks:
    `hooks.flow`)."""
    from melissa_trainer.trainer.term_words import no_end_checkpoint

    assert no_end_checkpoint(True, None, False) == no_end_checkpoint(True, 600.0, False) == ""
    assert no_end_checkpoint(False, None, True) == no_end_checkpoint(False, 600.0, True) == ""
    assert no_end_checkpoint(False, None, False) == (
        "; save_at_end is off: no checkpoint is written at the end (a resume starts from the "
        "last one written before, or afresh)"
    )
    assert "at the end unless the one every 600 s is due (" in no_end_checkpoint(
        False, 600.0, False
    )


@pytest.mark.parametrize(
    ("last_save", "step", "flag", "asked", "denied"),
    [
        (None, 4, False, {}, True),  # (nothing saved, nothing asked: none comes)
        (2, 4, False, {}, True),  # (an earlier step's only)
        (4, 4, False, {}, False),  # (the last step's: save_steps', written or being)
        (2, 4, True, {}, False),  # (asked for at this step, not begun)
        (2, 4, False, {"should_save": "a hook"}, False),  # (kept for the ranks' agreement)
    ],
)
def test_the_end_words_are_decided_from_the_saves_as_they_are_said(
    last_save: int | None, step: int, flag: bool, asked: dict[str, str], denied: bool
) -> None:
    """hrev8: the words were decided once at the start from save_at_end and save_seconds,
    and denied the checkpoint save_steps wrote of the last step. `end_checkpoint_words`
    reads the trainer's saves as the line is said (save_at_end off here)."""
    from types import SimpleNamespace

    from melissa_trainer.trainer.term_words import end_checkpoint_words

    trainer: Any = SimpleNamespace(
        args=SimpleNamespace(save_at_end=False, save_seconds=None),
        state=SimpleNamespace(last_save_step=last_save, global_step=step),
        control=SimpleNamespace(should_save=flag, asked=asked),
    )
    said = end_checkpoint_words(trainer)
    assert ("no checkpoint is written at the end" in said) is denied, said
