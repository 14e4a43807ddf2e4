"""A stop record of ``error`` says how many more times the launcher restarts the failed
run (``restarts_left``: torchrun / ``accelerate launch --max_restarts N``); with some
left, a closing client waits for the restarted run, as after ``preempted``, and says a
restart is expected, rather than give up ("run this simulation again"). Absent, 0, or
invalid (read as 0, with a word): today's behaviour, never a crash. Failed before: the
close gave up on every ``error`` (tests/c/test_c_restarts_left.py: the C client alike).

The oracles are literal strings and hand-written records."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.launch_restarts import restarts_left
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.stream.stop_record_read import parse_record

ENDPOINT = "tcp://127.0.0.1:9"
#: values of restarts_left read as 0 (with a word), alike in C (stop_record.c)
INVALID = [-1, 1.5, "1", True, None, 2**31, 10**30, [1]]
WORD = (
    "the stop record in {path}: its restarts_left is not an integer from 0 to 2147483647: "
    "read as 0, no restart of the failed run expected"
)


def record_of(reason: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "run_id": "run-a", "reason": reason, "finished": [], "byes": [],
            "complete": True}  # fmt: skip


def records(tmp_path: Path, **extra: Any) -> StopRecords:
    """The close's `StopRecords` (simulation 3) of a receiver stopped for ``error``
    (`extra`: more of its reason)."""
    reason = {"code": "error", "message": "training stopped: boom", **extra}
    entry = {"stopped": True, "endpoint": ENDPOINT, "stop_record": record_of(reason)}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    return StopRecords(str(tmp_path), [ENDPOINT], "run-a", 3, 0, "simulation 3")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("left", [1, 2, 2**31 - 1])
def test_an_error_with_restarts_left_is_waited_for(tmp_path: Path, left: int) -> None:
    said = records(tmp_path, restarts_left=left)
    assert said.decide(0, 5, (0, 4)) is None  # (undecided: the waits decide)
    assert said.for_good() is None
    assert said.preempted() == (
        f"the trainer failed and its launcher restarts it: a restart is expected ({left} "
        f"left) (training stopped: boom; its stop record in {tmp_path})"
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize("extra", [{}, {"restarts_left": 0}], ids=["absent", "zero"])
def test_an_error_without_restarts_left_is_final(tmp_path: Path, extra: dict[str, int]) -> None:
    said = records(tmp_path, **extra)
    with pytest.raises(DeliveryFailed, match="run this simulation again|run it again"):
        said.decide(0, 5, (0, 4))
    assert said.for_good() is not None and said.preempted() is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize("bad", INVALID, ids=repr)
def test_an_invalid_restarts_left_is_read_as_0_with_a_word(
    tmp_path: Path, bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    said = records(tmp_path, restarts_left=bad)
    with caplog.at_level(logging.WARNING):
        with pytest.raises(DeliveryFailed):
            said.decide(0, 5, (0, 4))
        assert said.for_good() is not None and said.preempted() is None
    words = [r.getMessage() for r in caplog.records if "restarts_left" in r.getMessage()]
    path = tmp_path / "rank_0.json"
    assert words == [f"simulation 3: {WORD.format(path=path)}"], words  # (once)


@pytest.mark.timeout(30)
def test_the_record_says_the_launchers_restarts_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Written of ``error`` only, and only under torchrun (its variables valid)."""
    env = {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_MAX_RESTARTS": "3",
           "TORCHELASTIC_RESTART_COUNT": "1"}  # fmt: skip
    assert restarts_left(env) == 2
    assert restarts_left({**env, "TORCHELASTIC_RESTART_COUNT": "5"}) == 0
    assert restarts_left({**env, "TORCHELASTIC_MAX_RESTARTS": "x"}) is None
    assert restarts_left({"TORCHELASTIC_MAX_RESTARTS": "3"}) is None  # (not torchrun)
    for name in ("TORCHELASTIC_RUN_ID", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    ingest = _EmptyIngest()
    error = StopReason("error", "training stopped: boom")
    assert "restarts_left" not in build_record(ingest, "run-a", error)["reason"]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    written = build_record(ingest, "run-a", error)
    assert written["reason"]["restarts_left"] == 2
    assert parse_record(written).reason.restarts_left == 2
    assert "restarts_left" not in build_record(ingest, "run-a", StopReason("end", "x"))["reason"]


class _EmptyIngest:
    """An `IngestState` that took nothing (what `build_record` reads of it)."""

    class _Refused:
        by_simulation: dict[int, int] = {}

    class _Archive:
        steps: dict[int, int] = {}

    nonfinite, archive = _Refused(), _Archive()
    finished_ids: list[int] = []
    sims: dict[int, Any] = {}
    expected = None
    world, rank, shifted = 1, 0, set()

    def unfinished(self) -> list[int]:
        return []
