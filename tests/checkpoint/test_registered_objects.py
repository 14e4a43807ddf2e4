"""Objects a user registers with Accelerate (``trainer.accelerator.
register_for_checkpointing(obj)``: saved as ``custom_checkpoint_<i>.pkl``, after the
trainer's scheduler) and a resume that registers another number of them, or the same
ones in another order, is refused before anything is loaded, naming the objects the
checkpoint has and those the script registers, and the fix. Before: Accelerate's raw
"Number of custom checkpoints in folder ... does not match the number of registered
objects" after the model and optimizer were loaded, or, for another order, each object
given the other's state without a word. A checkpoint written before the record
(`checkpoint.registered_objects`) is judged by its count of files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from small_run import copy_of, small_trainer, step_lr

from melissa_trainer.checkpoint.scheduler_class import SCHEDULER_FILE
from melissa_trainer.config.reading import ConfigError

pytestmark = pytest.mark.timeout(180)


class Counter:
    """A user's stateful object (an EMA, a curriculum...)."""

    def __init__(self) -> None:
        self.count = 0

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


class Curriculum(Counter):
    """Another one."""


def run(out: Path, steps: int, resume: str | None, objects: list[Any]) -> Any:
    """The small run (small_run.py) under a StepLR(step_size=7, gamma=0.5), `objects`
    registered for checkpointing."""
    trainer = small_trainer(
        out,
        steps,
        resume,
        scheduler=step_lr(),
    ).trainer
    trainer.accelerator.register_for_checkpointing(*objects)
    return trainer


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 steps under StepLR, a Counter and a Curriculum registered: checkpoint-10."""
    out = tmp_path_factory.mktemp("written") / "out"
    counter, curriculum = Counter(), Curriculum()
    counter.count, curriculum.count = 3, 5
    run(out, 10, None, [counter, curriculum]).train()
    return out


def refused(written: Path, tmp_path: Path, objects: list[Any]) -> str:
    out = copy_of(written, tmp_path)
    trainer = run(out, 20, "latest", objects)
    with pytest.raises(ConfigError) as caught:
        trainer.train()
    assert trainer.state.global_step == 0  # refused before anything was loaded
    return str(caught.value)


@pytest.mark.parametrize("objects", [[], [Counter()], [Counter(), Curriculum(), Counter()]])
def test_another_number_is_refused_naming_both(
    written: Path, tmp_path: Path, objects: list[Any]
) -> None:
    said = refused(written, tmp_path, objects)
    assert "Number of custom checkpoints" not in said, said  # (Accelerate's raw error)
    assert "has 3 objects registered for checkpointing (StepLR, Counter, Curriculum)" in said
    assert f"this run registers {len(objects) + 1}" in said, said
    assert "register_for_checkpointing" in said and "same order" in said, said


def test_another_order_is_refused(written: Path, tmp_path: Path) -> None:
    said = refused(written, tmp_path, [Curriculum(), Counter()])
    assert "(StepLR, Counter, Curriculum)" in said, said
    assert "this run registers 3 (StepLR, Curriculum, Counter)" in said, said


def test_the_same_objects_resume_their_state(written: Path, tmp_path: Path) -> None:
    out = copy_of(written, tmp_path)
    counter, curriculum = Counter(), Curriculum()
    run(out, 10, "latest", [counter, curriculum]).train()
    assert (counter.count, curriculum.count) == (3, 5)


def test_unrecorded_another_number_is_refused_by_its_files(written: Path, tmp_path: Path) -> None:
    """A checkpoint written before the record (its key removed by hand: unverified,
    loaded by `load_checkpoint`)."""
    path = tmp_path / "out" / "checkpoints" / "checkpoint-10"
    shutil.copytree(written, tmp_path / "out")
    record = json.loads((path / SCHEDULER_FILE).read_text())
    record.pop("registered")
    (path / SCHEDULER_FILE).write_text(json.dumps(record))
    trainer = run(tmp_path / "new", 20, None, [Counter()])
    with pytest.raises(ConfigError) as caught:
        trainer.load_checkpoint(path)
    said = str(caught.value)
    assert "has 3 objects registered for checkpointing (custom_checkpoint_0.pkl" in said, said
    assert "this run registers 2 (StepLR, Counter)" in said, said


def test_the_installed_accelerate_keeps_the_list_the_check_reads() -> None:
    """The check reads Accelerate's private list of registered objects and stands aside
    when it is absent (Accelerate's own count check then speaks): an Accelerate without
    it must fail here, not silently turn the check off."""
    from accelerate import Accelerator

    from melissa_trainer.checkpoint.registered_objects import names

    acc = Accelerator(cpu=True)
    acc.register_for_checkpointing(Counter())
    assert names(acc) == ["Counter"]


def test_an_accelerator_without_the_list_is_not_refused(tmp_path: Path) -> None:
    """No ``_custom_objects``: nothing is claimed about the run's objects."""
    from melissa_trainer.checkpoint.registered_objects import check

    (tmp_path / "custom_checkpoint_0.pkl").write_bytes(b"")
    check(tmp_path, tmp_path / SCHEDULER_FILE, object())  # no raise
