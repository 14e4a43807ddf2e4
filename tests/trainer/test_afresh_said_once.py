"""``resume_from_checkpoint='latest'`` with no checkpoint yet: "starting afresh" is
said by the main rank alone. Every rank holds the same (empty) list and each said it:
a user trial's two ranks printed it twice (htrial3)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from melissa_trainer.trainer import resume_choice

pytestmark = pytest.mark.timeout(30)


def _rank(index: int, root: Path) -> SimpleNamespace:
    # (a stand-in of one rank of two: `from_main` is the main rank's list, the same here)
    return SimpleNamespace(
        args=SimpleNamespace(resume_from_checkpoint="latest"),
        checkpoint_root=str(root),
        is_main_process=index == 0,
        process_index=index,
        stop_sync=SimpleNamespace(distributed=False),
    )


def test_no_checkpoint_to_resume_is_said_by_the_main_rank_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "checkpoints"
    said = []
    for index in (0, 1):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            assert resume_choice.resolve_resume(_rank(index, root)) is None  # type: ignore[arg-type]
        said.append([r.getMessage() for r in caplog.records if "starting afresh" in r.getMessage()])
    assert len(said[0]) == 1 and f"no checkpoint under {root}" in said[0][0], said
    assert said[1] == [], said
