"""The words of a preemption's stop whose output directory is gone (`dir_lost`): the
exit status is 1, not the preemption's (a job script requeues on 143), and a requeued
run's resume is named: the latest checkpoint found there now, or none (start afresh)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from melissa_trainer.trainer.dir_lost import OutputDirLost, preempted_words
from melissa_trainer.trainer.stop_cause import StopCause


@pytest.mark.timeout(30)
def test_a_stop_with_no_checkpoint_left_says_a_requeue_starts_afresh(tmp_path: Path) -> None:
    words = preempted_words(StopCause(signal.SIGINT), tmp_path / "checkpoints")
    assert "this stop (SIGINT) asked for is not written" in words
    assert "exits with status 1, not 130" in words and "start afresh" in words
    lost = OutputDirLost(str(tmp_path), "removed", words)
    assert lost.code == 1 and str(lost).endswith(words)


@pytest.mark.timeout(30)
def test_a_directory_made_again_names_the_checkpoint_a_requeue_takes(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    for name in ("checkpoint-4", "checkpoint-12", ".tmp-checkpoint-16"):
        (root / name).mkdir(parents=True)
    cause = StopCause.launcher_gone(1)  # (the launcher's death: a SIGTERM's status)
    words = preempted_words(cause, root)
    assert f"this stop ({cause}) asked for" in words and "not 143" in words
    assert f"would resume from {root / 'checkpoint-12'}, whichever trainer wrote it" in words
