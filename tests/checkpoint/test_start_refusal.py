"""`resume_choice.start_refusal`: the library's one answer to "will this trainer's
`train()` refuse to start afresh here?", which the examples ask before they clear what
an earlier run left (examples/study_common.py mirrored the rule and missed a checkpoint
whose replacement a crash interrupted: tests/examples/test_example_rendezvous_kept.py).
A stand-in trainer: what the query reads of one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from melissa_trainer.trainer.resume_choice import start_refusal

pytestmark = pytest.mark.timeout(60)


def trainer(root: Path, resume: str | None = None, overwrite: bool = False, step: int = 0) -> Any:
    return SimpleNamespace(
        args=SimpleNamespace(resume_from_checkpoint=resume, overwrite_output_dir=overwrite),
        checkpoint_root=root,
        state=SimpleNamespace(global_step=step),
    )


def test_the_earlier_checkpoints_by_step_an_interrupted_replacement_among_them(
    tmp_path: Path,
) -> None:
    root = tmp_path / "checkpoints"
    for name in ("checkpoint-10", "checkpoint-9", "checkpoint-4.old", ".tmp-checkpoint-4"):
        (root / name).mkdir(parents=True)
    (root / "checkpoint-7.old").mkdir()  # (no staging beside it: not put back)
    assert start_refusal(trainer(root)) == ["checkpoint-4", "checkpoint-9", "checkpoint-10"]
    assert (root / "checkpoint-4.old").is_dir()  # (it looks only)


@pytest.mark.parametrize(
    "kwargs", [dict(resume="latest"), dict(overwrite=True), dict(step=3)], ids=str
)
def test_no_refusal_on_a_resume_an_overwrite_or_past_step_0(
    tmp_path: Path, kwargs: dict[str, Any]
) -> None:
    root = tmp_path / "checkpoints"
    (root / "checkpoint-10").mkdir(parents=True)
    assert start_refusal(trainer(root, **kwargs)) == []


def test_no_refusal_without_checkpoints(tmp_path: Path) -> None:
    assert start_refusal(trainer(tmp_path / "none")) == []
