"""Rank 0's line when ranks starve while its receiver is held (`ProgressFile.update`,
which then lifts the launcher's bound) names them in words: "rank 1 starves",
"ranks 1, 2 starve", never "rank(s) [1] starve"."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from test_starvation import FakeLauncher

from melissa_trainer.study.progress import ProgressFile, report_starving


@pytest.mark.parametrize(
    ("ranks", "words"), [([1], "rank 1 starves while"), ([1, 2], "ranks 1, 2 starve while")]
)
def test_the_starving_ranks_are_named_in_words(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, ranks: list[int], words: str
) -> None:
    launcher: Any = FakeLauncher()
    launcher.held = True  # rank 0's receiver waits for room in its buffer
    for rank in ranks:
        report_starving(tmp_path, "run1", rank, 5.0)
    with caplog.at_level(logging.INFO, "melissa_trainer.study.progress"):
        assert ProgressFile(tmp_path, "run1").update(launcher, now=0.0)
    (said,) = [r.getMessage() for r in caplog.records if "waits for room" in r.getMessage()]
    assert said.startswith(words) and "(s)" not in said, said
