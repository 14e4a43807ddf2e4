"""A save of a step whose checkpoint exists (a preemption's rewrite at the step a run
resumed from, `trainer.end_save`) replaces it with no moment where that step has no
checkpoint: one atomic exchange (``renameat2(RENAME_EXCHANGE)``) where Linux allows it.
Before, the old one was renamed aside and the new one renamed in: a crash between the
two left no ``checkpoint-STEP`` (only ``checkpoint-STEP.old``, which no resume takes),
and ``latest`` fell back to an older checkpoint or a fresh start. The crash is a failing
``os.replace`` (failed before: no checkpoint-5 listed)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from melissa_trainer.checkpoint import paths as ckpt


def _save(root: Path, step: int, text: str) -> Path:
    staging = ckpt.begin(root, step)
    (staging / "trainer_state.json").write_text(text)
    return staging


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="Linux's renameat2")
def test_a_crash_while_replacing_a_checkpoint_never_leaves_the_step_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt.commit(_save(tmp_path, 5, '{"old": true}'), ckpt.checkpoint_path(tmp_path, 5))
    staging = _save(tmp_path, 5, '{"new": true}')
    renames = []

    def crash_after_one_rename(src: object, dst: object) -> None:
        if renames:
            raise KeyboardInterrupt("the node died")
        renames.append((src, dst))
        os.rename(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt.os, "replace", crash_after_one_rename)
    with contextlib.suppress(KeyboardInterrupt):
        ckpt.commit(staging, ckpt.checkpoint_path(tmp_path, 5))
    monkeypatch.undo()
    found = ckpt.list_checkpoints(tmp_path)
    assert [p.name for p in found] == ["checkpoint-5"], sorted(os.listdir(tmp_path))
    assert "new" in (found[0] / "trainer_state.json").read_text()
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-5"]  # the old one removed
