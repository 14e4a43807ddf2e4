"""`StopRecords` warns of "the stop record in PATH is not valid (...)" and of "its
restarts_left is not an integer ..." each once per rank, separately, as the C client
keeps two flags (clients/c/src/close_checks.h ``mt_stop_look``: ``warned`` and
``restarts_warned``). Found by review hrev9 (2026-12-07): one set ``_warned`` held both,
so a receiver whose record said an invalid restarts_left (warned) and was then rewritten
invalid was not warned of in Python (C warns), and a close waited on an ignored record
without a word. The oracle: the C client's flags, and the warning the Python close gives
that invalid record on its own (the control below)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.client.stopped import StopRecords

pytestmark = pytest.mark.timeout(30)
ENDPOINT = "tcp://127.0.0.1:9"


def write(tmp_path: Path, record: dict[str, Any]) -> None:
    entry = {"stopped": True, "endpoint": ENDPOINT, "stop_record": record}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))


def error_record(**extra: Any) -> dict[str, Any]:
    reason = {"code": "error", "message": "training stopped: boom", **extra}
    return {"version": 1, "run_id": "run-a", "reason": reason, "finished": [], "byes": [],
            "complete": True}  # fmt: skip


#: a record that is not valid (its reason's code unknown), long enough to change the size
INVALID = {**error_record(), "reason": {"code": "no-such-code-at-all", "message": "m"}}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_control_an_invalid_record_alone_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, INVALID)
    with caplog.at_level(logging.WARNING):
        assert StopRecords(str(tmp_path), [ENDPOINT], "run-a", 3, 0, "sim 3").record(0) is None
    assert any("is not valid" in w for w in warnings_of(caplog)), warnings_of(caplog)


def test_an_invalid_record_after_a_bad_restarts_left_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    records = StopRecords(str(tmp_path), [ENDPOINT], "run-a", 3, 0, "sim 3")
    with caplog.at_level(logging.WARNING):
        write(tmp_path, error_record(restarts_left="x"))
        assert records.record(0) is not None
        assert any("restarts_left" in w for w in warnings_of(caplog)), warnings_of(caplog)
        write(tmp_path, INVALID)
        assert records.record(0) is None
    assert any("is not valid" in w for w in warnings_of(caplog)), warnings_of(caplog)
