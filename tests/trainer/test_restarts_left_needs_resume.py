"""A stop record of ``error`` promises torchrun's restarts (``restarts_left`` > 0) only
when the restart resumes: the restart runs the same command, which resumes only if it
says ``resume_from_checkpoint`` (else it is refused at start over the first attempt's
checkpoints, `start_refusal`), and only while ``output_dir`` is there (nothing to resume
from once it is removed). Found by review hrev9 (2026-12-07): the record said
``restarts_left`` from torchrun's environment alone, so solvers waited `follow_timeout`
saying "a restart is expected (N left)" for a restart that was refused, then failed,
where they are told at once to run again. The oracle: the trainer's own arguments (read
by the test, not by the code under test) and the refusal of the same command, shown by
`start_refusal`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stop_records import failing_trainer

from melissa_trainer.hooks import Hook

pytestmark = pytest.mark.timeout(120)


class Boom(RuntimeError):
    """The hook's own failure."""


class FailingHook(Hook):
    def on_train_start(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("fails on the first attempt")


class LosesOutputDir(Hook):
    """Fails as `train()` does once `output_dir` is removed (`dir_lost.OutputDirLost`)."""

    def on_train_start(self, trainer: Any, *args: Any, **kwargs: Any) -> None:
        from melissa_trainer.trainer.dir_lost import OutputDirLost

        raise OutputDirLost(trainer.args.output_dir, "removed")


def failed_reason(
    tmp_path: Path, resume: str | None, monkeypatch: Any, hook: Hook | None = None
) -> dict[str, Any]:
    """The record of a first attempt (torchrun --max_restarts 2) that fails."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "r")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "2")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    with pytest.raises(RuntimeError):  # (`Boom`, or `OutputDirLost`)
        failing_trainer(tmp_path, hook or FailingHook(), resume_from_checkpoint=resume).train()
    entry = json.loads((tmp_path / "rendezvous" / "rank_0.json").read_text())
    reason: dict[str, Any] = entry["stop_record"]["reason"]
    assert reason["code"] == "error", reason
    return reason


def test_a_command_that_resumes_promises_its_restarts(tmp_path: Path, monkeypatch: Any) -> None:
    """With ``resume_from_checkpoint="latest"`` the restart
    resumes, and the record says 2 restarts left."""
    assert failed_reason(tmp_path, "latest", monkeypatch).get("restarts_left") == 2


def test_a_command_that_does_not_resume_promises_no_restart(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Failed before the fix (the record said 2 left): a command without
    ``resume_from_checkpoint`` promises no restart."""
    reason = failed_reason(tmp_path, None, monkeypatch)
    assert reason.get("restarts_left", 0) == 0, reason


def test_the_same_command_is_refused_over_a_checkpoint(tmp_path: Path) -> None:
    """Why the promise is false: the restart runs the same command; once the first
    attempt wrote a checkpoint, that command (no resume) is refused at start."""
    from melissa_trainer.trainer.resume_choice import start_refusal

    trainer = failing_trainer(tmp_path, FailingHook())
    (trainer.checkpoint_root / "checkpoint-4").mkdir(parents=True)
    try:
        listed = start_refusal(trainer)
    finally:
        trainer._output_hold.release()
    assert listed == ["checkpoint-4"]


def test_a_run_whose_output_dir_is_lost_promises_no_restart(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Even a command that resumes has nothing to resume from once `output_dir` is gone:
    its record says no restart left."""
    reason = failed_reason(tmp_path, "latest", monkeypatch, LosesOutputDir())
    assert reason.get("restarts_left", 0) == 0, reason
