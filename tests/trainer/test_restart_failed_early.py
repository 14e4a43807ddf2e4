"""A restarted attempt (torchrun / ``accelerate launch --max_restarts N``) that fails
before its receiver publishes (here: its resume, over a checkpoint that does not verify)
rewrites the failed run's stop record with its own ``restarts_left``: 0 when it was the
last attempt, and then its waiting clients end at once, saying that the restart failed
(`stream.restart_failed`). Failed before: the record kept the first attempt's
``restarts_left`` 1, and a closing client waited its ``follow_timeout`` for a restart
that never came. The oracle: torchrun's variables set by the test, the records read as
JSON, and the Python client's `StopRecords` reading the file (the C client quotes the
same message: tests/c/test_c_restart_failed.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stop_records import failing_trainer

from melissa_trainer.client.gave_up import DeliveryFailed
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.hooks import Hook

pytestmark = pytest.mark.timeout(120)


class FailingHook(Hook):
    def on_train_start(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("fails on the first attempt")


def attempt(monkeypatch: Any, count: int, most: int) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "r")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", str(most))
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(count))


def entry_of(tmp_path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((tmp_path / "rendezvous" / "rank_0.json").read_text())
    return loaded


def fail_twice(tmp_path: Path, monkeypatch: Any, most: int) -> tuple[dict[str, Any], StopRecords]:
    """A first attempt that fails in training (its record: ``error``, `most` restarts
    left), then a restart (1 of `most`) that fails at its resume, before its receiver
    starts: rank 0's rendezvous entry after both, and a closing client's `StopRecords`
    that waited for the restart between them (simulation 3)."""
    attempt(monkeypatch, 0, most)
    with pytest.raises(RuntimeError, match="first attempt"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest").train()
    first = entry_of(tmp_path)
    assert first["stop_record"]["reason"]["restarts_left"] == most, first
    run_id, endpoint = first["stop_record"]["run_id"], first["endpoint"]
    waiting = StopRecords(str(tmp_path / "rendezvous"), [endpoint], run_id, 3, 0, "sim 3")
    assert waiting.decide(0, 5, (0, 4)) is None  # (a restart awaited)
    attempt(monkeypatch, 1, most)
    trainer = failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest")
    (trainer.checkpoint_root / "checkpoint-4").mkdir(parents=True)  # (does not verify)
    with pytest.raises(Exception) as failed:
        trainer.train()
    assert "first attempt" not in str(failed.value)  # (its resume failed, not the hook)
    entry = entry_of(tmp_path)
    assert entry["endpoint"] == first["endpoint"]  # (no receiver of the restart published)
    return entry, waiting


def test_the_last_restart_failing_early_says_none_is_left(tmp_path: Path, monkeypatch: Any) -> None:
    entry, said = fail_twice(tmp_path, monkeypatch, 1)
    reason = entry["stop_record"]["reason"]
    assert reason["code"] == "error" and reason["restarts_left"] == 0, reason
    assert reason["message"].startswith(
        "the restarted run (restart 1 of 1) failed before its receiver of rank 0 started; "
        "no restart left"
    ), reason
    assert said.preempted() is None  # (the waiting client: no restart awaited now, final)
    with pytest.raises(DeliveryFailed, match=r"error: the restarted run \(restart 1 of 1\) failed"):
        said.decide(0, 5, (0, 4))


def test_a_restart_failing_early_with_restarts_left_says_how_many(
    tmp_path: Path, monkeypatch: Any
) -> None:
    entry, said = fail_twice(tmp_path, monkeypatch, 3)
    reason = entry["stop_record"]["reason"]
    assert reason["restarts_left"] == 2, reason  # (3 - 1: the next restart still comes)
    assert reason["message"].startswith(
        "the restarted run (restart 1 of 3) failed before its receiver of rank 0 started; "
        "2 restart(s) left"
    ), reason
    assert said.decide(0, 5, (0, 4)) is None  # (waited for: a restart follows)
    assert "a restart is expected (2 left)" in (said.preempted() or "")


def test_a_first_attempt_leaves_another_launchs_record(tmp_path: Path, monkeypatch: Any) -> None:
    """A record there before a first attempt is another launch's: left as it is."""
    attempt(monkeypatch, 0, 1)
    with pytest.raises(RuntimeError, match="first attempt"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest").train()
    before = entry_of(tmp_path)
    trainer = failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest")
    (trainer.checkpoint_root / "checkpoint-4").mkdir(parents=True)
    with pytest.raises(Exception):  # noqa: B017 (the resume's refusal, whatever its kind)
        trainer.train()
    assert entry_of(tmp_path) == before


def test_a_last_restart_whose_set_up_fails_says_none_is_left(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The restart fails in its set-up (its process group does not form: torch's error
    raised where the trainer builds its `Accelerator`, `trainer.setup.make_accelerator`,
    replaced here by one that raises it): the record says 0 left, as after a failed
    resume. Failed before: 1 left."""
    import melissa_trainer.trainer.loop as loop

    attempt(monkeypatch, 0, 1)
    with pytest.raises(RuntimeError, match="first attempt"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest").train()
    attempt(monkeypatch, 1, 1)

    def no_group(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Gloo connectFullMesh failed: Connection refused")

    monkeypatch.setattr(loop, "make_accelerator", no_group)
    with pytest.raises(RuntimeError, match="connectFullMesh"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest")
    reason = entry_of(tmp_path)["stop_record"]["reason"]
    assert reason["restarts_left"] == 0, reason
    assert reason["message"].startswith(
        "the restarted run (restart 1 of 1) failed before its receiver of rank 0 started; "
        "no restart left: the launcher gave up, the run is not coming back on its own "
        "(RuntimeError: Gloo connectFullMesh failed: Connection refused)"
    ), reason
