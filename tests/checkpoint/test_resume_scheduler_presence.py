"""A learning-rate scheduler added or removed on resume is refused before anything is
loaded, saying which side has one and the fix (not Accelerate's count of "registered
objects"); a checkpoint written before the scheduler's class was recorded is judged by
its scheduler state file (``custom_checkpoint_0.pkl``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from small_run import BuildScheduler, copy_of, exponential_lr, small_trainer, step_lr

from melissa_trainer.checkpoint.scheduler_class import SCHEDULER_FILE

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two runs of 10 steps: one under StepLR, one without a scheduler."""
    made = {}
    for name, build in (("with", step_lr()), ("without", None)):
        made[name] = out = tmp_path_factory.mktemp(name) / "out"
        small_trainer(out, 10, None, scheduler=build).trainer.train()
    return made


def refusal(runs: dict[str, Path], tmp_path: Path, which: str, build: BuildScheduler | None) -> str:
    out = copy_of(runs[which], tmp_path)
    trainer = small_trainer(out, 20, "latest", scheduler=build).trainer
    with pytest.raises(ValueError) as caught:
        trainer.train()
    assert trainer.state.global_step == 0
    return str(caught.value)


def test_a_scheduler_removed_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    message = refusal(runs, tmp_path, "with", None)
    assert "was written with a learning-rate scheduler (StepLR) and this run has none" in message
    assert "pass the run's scheduler again" in message, message
    assert "registered objects" not in message, message


def test_a_scheduler_added_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    message = refusal(runs, tmp_path, "without", exponential_lr())
    assert "written without a learning-rate scheduler and this run has one (ExponentialLR)" in (
        message
    )
    assert "build none to resume" in message, message
    assert "registered objects" not in message, message


@pytest.mark.parametrize("which, build", [("with", None), ("without", exponential_lr())])
def test_unrecorded_presence_is_judged_by_the_state_file(
    runs: dict[str, Path], tmp_path: Path, which: str, build: BuildScheduler | None
) -> None:
    out = copy_of(runs[which], tmp_path)
    path = out / "checkpoints" / "checkpoint-10"
    (path / SCHEDULER_FILE).unlink()  # (a version before the record; by hand: unverified)
    trainer = small_trainer(tmp_path / "new", 20, None, scheduler=build).trainer
    with pytest.raises(ValueError) as caught:
        trainer.load_checkpoint(path)
    message = str(caught.value)
    if which == "with":
        assert "a learning-rate scheduler's state (custom_checkpoint_0.pkl)" in message
        assert "StepLR" not in message, message  # not recorded: not said
    else:
        assert "written without a learning-rate scheduler" in message, message
