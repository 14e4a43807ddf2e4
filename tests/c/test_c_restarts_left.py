"""The C client reads a stop record's ``restarts_left`` as the Python one does
(tests/client/test_stop_restarts_left.py): ``error`` with restarts left (the launcher
restarts the failed run, which resumes) is waited for as ``preempted``, its words "the
trainer failed and its launcher restarts it: a restart is expected (N left)"; absent,
0 or invalid (read as 0, with the same word on stderr): final, as before. Failed
before: the C close gave up on every ``error``, saying nothing of a restart.

The receiver runs here (`test_c_preempted_words.preempted_then`); the oracles are
literal strings and the Python client's `StopRecords` reading the same file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from test_c_preempted_words import MT_ETIMEDOUT, preempted_then

from melissa_trainer.client.stopped import StopRecords

pytestmark = [
    pytest.mark.e2e,  # a process of its own (the solver)
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]

RESTART = "the trainer failed and its launcher restarts it: a restart is expected (2 left)"


def python_says(rendezvous: Path) -> str | None:
    """The Python close's words of the same record (None: not waited for)."""
    endpoint = json.loads((rendezvous / "rank_0.json").read_text())["endpoint"]
    return StopRecords(str(rendezvous), [endpoint], "run-a", 3, 0, "x").preempted()


def test_an_error_with_restarts_left_is_waited_for_as_preempted(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / "rv"
    _, closed, lines, err = preempted_then(
        script_exe, rendezvous, "close", code="error", message="boom", restarts_left=2
    )
    code, message = (lines[closed][-1].split(" ", 1) + [""])[:2]
    assert int(code) == MT_ETIMEDOUT, (lines[closed], err)
    said = f"{RESTART} (boom; its stop record in {rendezvous})"
    assert said in message, message
    assert python_says(rendezvous) == said
    notice = [line for line in err.splitlines() if ": closing, the trainer's receiver" in line]
    assert len(notice) == 1 and said in notice[0], err


@pytest.mark.parametrize("bad", [-1, 1.5, "1", True, None, 2**31, 10**30, [1]], ids=repr)
def test_an_invalid_restarts_left_is_read_as_0_with_a_word(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    bad: Any,
) -> None:
    rendezvous = tmp_path / "rv"

    def invalid(record: dict[str, Any]) -> None:
        record["reason"]["restarts_left"] = bad

    _, closed, lines, err = preempted_then(
        script_exe, rendezvous, "close", code="error", message="boom", edit=invalid
    )
    code, message = (lines[closed][-1].split(" ", 1) + [""])[:2]
    assert int(code) == MT_ETIMEDOUT, (lines[closed], err)
    assert "restart is expected" not in message and "(error: boom" in message, message
    word = (
        f"the stop record in {rendezvous}/rank_0.json: its restarts_left is not an integer "
        f"from 0 to 2147483647: read as 0, no restart of the failed run expected"
    )
    assert f"melissa_trainer: mt_client_close: {word}" in err, err
    assert python_says(rendezvous) is None
