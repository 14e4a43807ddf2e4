"""Rank 0's study-end thread (`study.end_notice.StudyEndNotice`) whose attempt to tell
the other ranks that the study failed (`ProgressFile.failed`) raises says so, in those
words: before, its catch-all said "could not tell the other ranks that the study has
ended", false of a study that failed. Failed before the change.

The thread's body is run in the test's thread (`_run`), on a launcher that gave up; the
progress file's `failed` raises (it documents that it never does: a failure of what it
calls, a bug, must still be said in the right words)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from test_study_failed_progress import GAVE_UP, FailedLauncher

from melissa_trainer.study.end_notice import StudyEndNotice


def broken(*args: Any) -> bool:
    raise OSError("disk gone")


def test_a_failed_study_that_cannot_be_told_says_failed_not_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": "tcp://127.0.0.1:1"}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    launcher: Any = FailedLauncher()
    notice = StudyEndNotice(launcher, tmp_path, "run1")
    notice.progress.failed = broken  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        notice._run()  # (returns: said, never raised)
    said = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "could not tell the other ranks that the study failed" in said, said
    assert "OSError('disk gone')" in said and GAVE_UP.splitlines()[0] in said, said
    assert "has ended" not in said, said
    assert not notice.told.is_set()
