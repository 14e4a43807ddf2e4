"""A resume from a checkpoint of another folder (another run's output_dir, a copy)
moves every checkpoint of this output_dir aside (`checkpoint.later_runs.
set_aside_later`): none is of the history the run continues.

Before, they stayed: the run resumed from ``one``'s checkpoint-10 in ``two``, which
held checkpoint-10, -20 and -30 of another run; its save of step 20 replaced the other
run's, its rotation (``max_to_keep`` 3) deleted its own checkpoint-15 and kept the
other run's 30, and the next ``latest`` resumed from that 30 (first step 31), dropping
the new run's steps 11 to 25."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from resume_scenario import run

from melissa_trainer.checkpoint import paths as ckpt

pytestmark = pytest.mark.timeout(180)

BASE: dict[str, Any] = {"buffer": "fifo", "n_samples": 400, "save_steps": 10}


def names(root: Path) -> list[str]:
    return [p.name for p in ckpt.list_checkpoints(root)]


def test_resuming_another_folders_checkpoint_moves_this_folders_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(dict(BASE, output_dir=str(tmp_path / "one"), max_steps=10))
    run(dict(BASE, output_dir=str(tmp_path / "two"), max_steps=30))
    root = tmp_path / "two" / "checkpoints"
    theirs = {n: (root / n / "model.safetensors").read_bytes() for n in names(root)}
    assert list(theirs) == ["checkpoint-10", "checkpoint-20", "checkpoint-30"]
    source = tmp_path / "one" / "checkpoints" / "checkpoint-10"
    config = dict(BASE, output_dir=str(tmp_path / "two"), save_steps=5)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        run(dict(config, max_steps=25, resume_from_checkpoint=str(source)))
    # before: ['checkpoint-20', 'checkpoint-25', 'checkpoint-30'], 20 this run's, 30 theirs
    assert names(root) == ["checkpoint-15", "checkpoint-20", "checkpoint-25"]
    (aside,) = root.parent.glob("checkpoints-previous-*")
    assert {n: (aside / n / "model.safetensors").read_bytes() for n in names(aside)} == theirs
    said = [r.getMessage() for r in caplog.records if str(aside) in r.getMessage()]
    assert len(said) == 1 and str(source) in said[0], said
    resumed = run(dict(config, max_steps=30, resume_from_checkpoint="latest"))
    assert resumed["losses"][0][0] == 26, resumed["losses"][:2]  # (before: 31, theirs)
