"""Review finding (hrev10): the invalid-``restarts_left`` word, now once per client
*process and path* (999ee462, `client.stopped._RESTARTS_WARNED`), is never said for a
later record at that path: a trainer run again on the same rendezvous directory (a new
run id, a new failure, its own invalid ``restarts_left``) writes a new record to the
same ``rank_R.json``, and a long-lived client process (a worker running several
simulations, a notebook) reads it silently, reading 0 restarts without saying why. The
claim was "a user reads one word per file"; the word is about a record, and this is
another one. The oracle: two records of two runs, each invalid, the count of the words."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from melissa_trainer.client.stopped import StopRecords

pytestmark = pytest.mark.timeout(30)
ENDPOINT = "tcp://127.0.0.1:9"


def _write(directory: Path, run_id: str) -> None:
    reason = {"code": "error", "message": f"{run_id} failed", "restarts_left": "x"}
    record = {"version": 1, "run_id": run_id, "reason": reason, "finished": [], "byes": [],
              "complete": True}  # fmt: skip
    entry = {"stopped": True, "endpoint": ENDPOINT, "stop_record": record}
    (directory / "rank_0.json").write_text(json.dumps(entry))


def test_another_runs_invalid_record_at_the_same_path_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        for run_id in ("run-a", "run-b"):  # the trainer run again, failing again
            _write(tmp_path, run_id)
            said = StopRecords(str(tmp_path), [ENDPOINT], run_id, 3, 0, "simulation 3")
            record = said.record(0)
            assert record is not None and record.run_id == run_id
    words = [r.getMessage() for r in caplog.records if "its restarts_left is not" in r.getMessage()]
    assert len(words) == 2, words  # one per record: today 1 (run-b's is silent)
