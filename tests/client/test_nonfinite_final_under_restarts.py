"""A ``nonfinite`` stop (a sample holding NaN or Inf under ``nonfinite="fail"``) is final
under torchrun even with restarts left (`stop_record`'s docstring, docs/how-to/
preemption.md): the restart runs the same command from the last checkpoint, takes the
same sample again and stops on it again. Pinned: the record written under torchrun says
no ``restarts_left`` of it, a record that says some anyway is not waited for (its
simulation refused, any other's close failed at once), and the docs say so.

The oracles: torchrun's variables set by the test, hand-written records, literal words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_stop_restarts_left import _EmptyIngest

from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.stop_record import StopReason, build_record, resumable
from melissa_trainer.stream.stop_record_read import parse_record

pytestmark = pytest.mark.timeout(30)

ENDPOINT = "tcp://127.0.0.1:9"
ROOT = Path(__file__).resolve().parents[2]


def test_the_record_promises_no_restart_of_a_nonfinite_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_MAX_RESTARTS": "3",
                        "TORCHELASTIC_RESTART_COUNT": "0"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    stop = StopReason("nonfinite", "simulation 3's step 7 holds NaN", 3, 7)
    written = build_record(_EmptyIngest(), "run-a", stop)
    assert "restarts_left" not in written["reason"], written
    assert not resumable(parse_record(written).reason)


@pytest.mark.parametrize("sid", [3, 4], ids=["its simulation", "another"])
def test_a_nonfinite_record_saying_restarts_left_is_final(tmp_path: Path, sid: int) -> None:
    reason: dict[str, Any] = {"code": "nonfinite", "message": "NaN", "simulation_id": 3,
                              "time_step": 7, "restarts_left": 2}  # fmt: skip
    record = {"version": 1, "run_id": "run-a", "reason": reason, "finished": [], "byes": [],
              "complete": True}  # fmt: skip
    entry = {"stopped": True, "endpoint": ENDPOINT, "stop_record": record}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    said = StopRecords(str(tmp_path), [ENDPOINT], "run-a", sid, 0, f"simulation {sid}")
    assert said.preempted() is None and said.for_good() is not None
    with pytest.raises(SimulationRefused if sid == 3 else DeliveryFailed):
        said.decide(0, 5, (0, 4))


def test_the_docs_say_a_nonfinite_stop_is_final_under_restarts() -> None:
    page = " ".join((ROOT / "docs" / "how-to" / "preemption.md").read_text().split())
    assert (
        "A stop on a non-finite sample (`nonfinite`, under `--nonfinite fail`) is final "
        "even with restarts left" in page
    )
