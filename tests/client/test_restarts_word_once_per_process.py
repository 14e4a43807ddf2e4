"""The word of an invalid ``restarts_left`` ("the stop record in PATH: its restarts_left is
not an integer ...") is said once per client process and record file, however many
`StopRecords` read it (a client's sends' follow and its close each hold one; a second
client in the same process another), as the C client says it once per process
(tests/c/test_c_restarts_word_once.py, clients/c/tests/unit_restarts_word.c). Failed
before: said once per `StopRecords`, so twice here, where the C client said it once per
client. The oracle: the count of the words in the log."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from melissa_trainer.client.stopped import StopRecords

pytestmark = pytest.mark.timeout(30)
ENDPOINT = "tcp://127.0.0.1:9"


def test_the_word_is_said_once_per_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reason = {"code": "error", "message": "boom", "restarts_left": "x"}
    record = {"version": 1, "run_id": "run-a", "reason": reason, "finished": [], "byes": [],
              "complete": True}  # fmt: skip
    entry = {"stopped": True, "endpoint": ENDPOINT, "stop_record": record}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    with caplog.at_level(logging.WARNING):
        for sid in (3, 3, 4):  # (a follow's and a close's of simulation 3; another client's)
            said = StopRecords(str(tmp_path), [ENDPOINT], "run-a", sid, 0, f"simulation {sid}")
            assert said.record(0) is not None
    words = [r for r in caplog.records if "its restarts_left is not an integer" in r.getMessage()]
    assert len(words) == 1, [r.getMessage() for r in words]
