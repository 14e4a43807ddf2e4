"""The C client ends as the Python one does when a restarted attempt failed before its
receivers published, its last restart (`stream.restart_failed`: the failed run's stop
record rewritten ``error`` with ``restarts_left`` 0, its message opening "the
restarted run (restart 1 of 1) failed"): its close is final at once, quoting those
words, where it waited its follow_timeout for a restart (the record said 1 left;
tests/trainer/test_restart_failed_early.py: the trainer's side, failed before).

The receiver runs here (`test_c_preempted_words.preempted_then`); the record is rewritten
by `note_restart_failed` itself; the oracles are literal strings and the Python client's
`StopRecords` reading the same file."""

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
from melissa_trainer.stream.restart_failed import note_restart_failed

pytestmark = [
    pytest.mark.e2e,  # a process of its own (the solver)
    pytest.mark.timeout(180),
    pytest.mark.skipif(sys.platform != "linux", reason="the C client's tests: Linux"),
]

#: the last restart (1 of 1) of a launch (`launch_restarts.restarts_left`: 0 left)
LAST = {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_MAX_RESTARTS": "1",
        "TORCHELASTIC_RESTART_COUNT": "1"}  # fmt: skip
SAID = (
    "(error: the restarted run (restart 1 of 1) failed before its receiver of rank 0 "
    "started; no restart left: the launcher gave up, the run is not coming back on its own "
    "(OSError: bind failed)"
)


def test_a_failed_last_restart_ends_the_close_at_once(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rendezvous = tmp_path / "rv"

    def restart_failed(record: dict[str, Any]) -> None:
        """The record as the failed restart rewrites it (`note_restart_failed` on a copy)."""
        aside = tmp_path / "aside"
        aside.mkdir()
        entry = {"stopped": True, "endpoint": "tcp://127.0.0.1:9", "stop_record": record}
        (aside / "rank_0.json").write_text(json.dumps(entry))
        assert note_restart_failed(aside, 0, OSError("bind failed"), environ=LAST)
        record["reason"] = json.loads((aside / "rank_0.json").read_text())["stop_record"]["reason"]

    _, closed, lines, err = preempted_then(
        script_exe, rendezvous, "follow_timeout 600", "close", code="error", message="boom",
        restarts_left=1, edit=restart_failed,
    )  # fmt: skip
    code, message = (lines[closed][-1].split(" ", 1) + [""])[:2]
    assert int(code) == MT_ETIMEDOUT, (lines[closed], err)
    assert SAID in message, message
    assert "restart is expected" not in message + err, (message, err)
    endpoint = json.loads((rendezvous / "rank_0.json").read_text())["endpoint"]
    python = StopRecords(str(rendezvous), [endpoint], "run-a", 3, 0, "x")
    assert python.preempted() is None
    said = python.for_good()
    assert said is not None and SAID[1:] in said.reason, said
