"""`progress.report_starving` writes its report aside, then renames it: a rename that
fails leaves no temporary file behind in the rendezvous (and is logged, not raised)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.study import progress


def test_a_failed_rename_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(src: object, dst: object) -> None:
        raise PermissionError("rename refused")

    monkeypatch.setattr(os, "replace", refuse)
    with caplog.at_level(logging.WARNING):
        progress.report_starving(tmp_path, "run-a", 1, 5.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # (no .starving-rank-1.json.PID)
    assert "rank 1 could not tell rank 0 that it starves" in caplog.text
    assert progress.read_starving(tmp_path, "run-a") == []


class Launcher:
    """What `ProgressFile.update` reads of the launcher."""

    def data_backpressured(self) -> bool:
        return False

    def silence_explained(self, idle: float = 0.0) -> str | None:
        return "starting up"

    def jobs_alive(self) -> int:
        return 1

    def summary(self) -> dict[str, float]:
        return {"running": 1.0}

    def lift_data_bound(self, lifted: bool) -> None:
        pass

    def held_by_data_bound(self) -> tuple[bool, int]:
        return False, 1


def test_rank_0s_failed_rename_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: object, dst: object) -> None:
        raise PermissionError("rename refused")

    monkeypatch.setattr(os, "replace", refuse)
    launcher: Any = Launcher()
    assert not progress.ProgressFile(tmp_path, "run-a").update(launcher, now=0.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # (no .progress file .PID)


def test_rank_0s_failed_writes_are_said_once_with_the_error_then_again_after_a_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # before: `ProgressFile._write` dropped the OSError: the other ranks lost rank 0's
    # word (its excuse for a silence) and no log said why
    def refuse(src: object, dst: object) -> None:
        raise PermissionError("rename refused")

    real = os.replace
    monkeypatch.setattr(os, "replace", refuse)
    launcher: Any = Launcher()
    file = progress.ProgressFile(tmp_path, "run-a")
    with caplog.at_level(logging.WARNING, logger=progress.__name__):
        assert not file.update(launcher, now=0.0)
        assert not file.update(launcher, now=10.0)  # (the same streak: said once)
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1, said
        assert str(file.path) in said[0] and "rename refused" in said[0], said
        monkeypatch.setattr(os, "replace", real)
        assert file.update(launcher, now=20.0)
        monkeypatch.setattr(os, "replace", refuse)
        launcher.silence_explained = lambda idle=0.0: None  # (a change: written again)
        assert not file.update(launcher, now=30.0)
    assert len(caplog.records) == 2, [r.getMessage() for r in caplog.records]
