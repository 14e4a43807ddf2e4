"""A learning-rate scheduler added or removed on resume is refused before anything is
loaded, saying which side has one and the fix (not Accelerate's count of "registered
objects"); a checkpoint written before the scheduler's class was recorded is judged by
its scheduler state file (``custom_checkpoint_0.pkl``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_resumed_scheduler_class import exponential, step_lr, trainer_for  # noqa: E402

from melissa_trainer.checkpoint.scheduler_class import SCHEDULER_FILE  # noqa: E402

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two runs of 10 steps: one under StepLR, one without a scheduler."""
    made = {}
    for name, build in (("with", step_lr), ("without", None)):
        made[name] = out = tmp_path_factory.mktemp(name) / "out"
        trainer_for(out, 10, None, build)[0].train()
    return made


def refusal(runs: dict[str, Path], tmp_path: Path, which: str, build: object) -> str:
    out = tmp_path / "out"
    shutil.copytree(runs[which], out)
    trainer, _ = trainer_for(out, 20, "latest", build)  # type: ignore[arg-type]
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
    message = refusal(runs, tmp_path, "without", exponential)
    assert "written without a learning-rate scheduler and this run has one (ExponentialLR)" in (
        message
    )
    assert "build none to resume" in message, message
    assert "registered objects" not in message, message


@pytest.mark.parametrize("which, build", [("with", None), ("without", exponential)])
def test_unrecorded_presence_is_judged_by_the_state_file(
    runs: dict[str, Path], tmp_path: Path, which: str, build: object
) -> None:
    out = tmp_path / "out"
    shutil.copytree(runs[which], out)
    path = out / "checkpoints" / "checkpoint-10"
    (path / SCHEDULER_FILE).unlink()  # (a version before the record; by hand: unverified)
    trainer, _ = trainer_for(tmp_path / "new", 20, None, build)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as caught:
        trainer.load_checkpoint(path)
    message = str(caught.value)
    if which == "with":
        assert "a learning-rate scheduler's state (custom_checkpoint_0.pkl)" in message
        assert "StepLR" not in message, message  # not recorded: not said
    else:
        assert "written without a learning-rate scheduler" in message, message
