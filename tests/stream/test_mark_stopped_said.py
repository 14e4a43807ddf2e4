"""`endpoints.mark_stopped` never raises, but a rendezvous file it could not mark is
said at WARNING, with the error: its clients would otherwise read the trainer as alive
(or, closing, as died) without the stop record, and nothing in the trainer's log would
say why (before: the OSError was dropped). A newer trainer's file is left alone
silently: that is not a failure."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from melissa_trainer.stream.endpoints import mark_stopped, write_rendezvous

pytestmark = pytest.mark.timeout(30)

ENDPOINT = "tcp://127.0.0.1:9"


def test_a_mark_that_cannot_be_written_is_said_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_rendezvous(tmp_path, 0, 1, ENDPOINT, {"run_id": "run-a"})

    def refuse(src: object, dst: object) -> None:
        raise PermissionError("rename refused")

    monkeypatch.setattr(os, "replace", refuse)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.stream.endpoints"):
        mark_stopped(tmp_path, 0, ENDPOINT, {"reason": "end"})
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said
    assert "rank_0.json" in said[0] and "rename refused" in said[0], said
    assert "stopped" not in json.loads((tmp_path / "rank_0.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank_0.json"]  # (no .tmp left)


def test_an_unreadable_file_is_said_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "rank_0.json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.stream.endpoints"):
        mark_stopped(tmp_path, 0, ENDPOINT)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and "rank_0.json" in said[0], said


def test_a_newer_trainers_file_is_left_alone_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_rendezvous(tmp_path, 0, 1, "tcp://127.0.0.1:10", {"run_id": "run-b"})
    with caplog.at_level(logging.DEBUG, logger="melissa_trainer.stream.endpoints"):
        mark_stopped(tmp_path, 0, ENDPOINT)
    assert caplog.records == []
    assert "stopped" not in json.loads((tmp_path / "rank_0.json").read_text())
