"""What a restarted attempt (torchrun / ``accelerate launch --max_restarts N``) that fails
in its set-up leaves in the failed run's stop records (`stream.restart_failed`).

* A failure in `OnlineTrainer.__init__` after its `Accelerator` (here: the output
  directory's claim, `trainer.setup.claim_output_dir`, refused by the file system)
  rewrites the record as a failure of the `Accelerator` does
  (`trainer.starting.setup_failed`). Failed before: the record
  kept the failed attempt's ``restarts_left`` 1 on the last restart.
* A rank killed outright during the set-up (torchrun's SIGTERM to a peer of the rank that
  failed, before `train()` installs its handlers) writes nothing; what a `Predictor`
  reads is ``rank_0.json`` alone (`client.predict_lookup`): the failing rank rewrites its
  peers' files too. Failed before: rank 0's file kept promising a restart, and the
  lookup said that a resumed trainer would serve there.

The oracles: torchrun's variables set by the test, the files read as JSON, the
Predictor's lookup and the Python client's `StopRecords` reading them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from stop_records import failing_trainer

from melissa_trainer.client.predict_lookup import RESUMED_SERVES, stopped_story
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.hooks import Hook
from melissa_trainer.stream.restart_failed import note_restart_failed
from melissa_trainer.stream.serving_rendezvous import NO_SERVER

pytestmark = pytest.mark.timeout(120)

LAST = {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_MAX_RESTARTS": "1",
        "TORCHELASTIC_RESTART_COUNT": "1", "WORLD_SIZE": "2"}  # fmt: skip


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


def first_attempt(tmp_path: Path, monkeypatch: Any) -> dict[str, Any]:
    """A first attempt (of at most 1 restart) that fails in training: rank 0's entry,
    whose record promises the restart."""
    attempt(monkeypatch, 0, 1)
    with pytest.raises(RuntimeError, match="first attempt"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest").train()
    entry = entry_of(tmp_path)
    assert entry["stop_record"]["reason"]["restarts_left"] == 1, entry
    return entry


def test_a_last_restart_whose_output_dir_claim_fails_says_none_is_left(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import melissa_trainer.trainer.loop as loop

    first_attempt(tmp_path, monkeypatch)
    attempt(monkeypatch, 1, 1)

    def locked(output_dir: str, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(f"[Errno 13] Permission denied: {output_dir!r}")

    monkeypatch.setattr(loop, "claim_output_dir", locked)
    with pytest.raises(PermissionError):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest")
    reason = entry_of(tmp_path)["stop_record"]["reason"]
    assert reason["restarts_left"] == 0, reason
    assert reason["message"].startswith(
        "the restarted run (restart 1 of 1) failed before its receiver of rank 0 started; "
        "no restart left: the launcher gave up, the run is not coming back on its own "
        "(PermissionError: "
    ), reason


def test_a_restart_without_resume_whose_claim_fails_promises_none(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The set-up's failure comes before the trainer tells its source whether a restart
    resumes: it is told on that path (a command without ``resume_from_checkpoint``
    restarts afresh: no restart of this run is promised, 3 left or not)."""
    import melissa_trainer.trainer.loop as loop

    attempt(monkeypatch, 0, 3)
    with pytest.raises(RuntimeError, match="first attempt"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest").train()
    attempt(monkeypatch, 1, 3)

    def locked(output_dir: str, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(f"[Errno 13] Permission denied: {output_dir!r}")

    monkeypatch.setattr(loop, "claim_output_dir", locked)
    with pytest.raises(PermissionError):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint=None)
    reason = entry_of(tmp_path)["stop_record"]["reason"]
    assert reason["restarts_left"] == 0, reason


def test_the_failing_rank_rewrites_the_file_of_a_peer_killed_outright(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Rank 1 of the last restart fails before its receiver starts; rank 0, killed by
    torchrun during its set-up, wrote nothing: its file still holds the failed attempt's
    record (a copy of the real one, as rank 1's is)."""
    entry = first_attempt(tmp_path, monkeypatch)
    rendezvous = tmp_path / "rendezvous"
    shutil.copy(rendezvous / "rank_0.json", rendezvous / "rank_1.json")
    run_id = entry["stop_record"]["run_id"]
    story = stopped_story(rendezvous, run_id, NO_SERVER, False)
    assert story is not None and story[1] is False, story  # (before: a resume awaited)
    assert note_restart_failed(rendezvous, 1, OSError("bind failed"), environ=LAST)
    for rank in (0, 1):
        reason = json.loads((rendezvous / f"rank_{rank}.json").read_text())["stop_record"]
        assert reason["reason"]["restarts_left"] == 0, (rank, reason)
        assert reason["reason"]["message"].startswith(
            "the restarted run (restart 1 of 1) failed before its receiver of rank 1 "
            "started; no restart left"
        ), (rank, reason)
        assert reason["run_id"] == run_id  # (the failed run's record, its receipts kept)
    story = stopped_story(rendezvous, run_id, NO_SERVER, False)
    assert story is not None and story[1] is True, story  # (final: no resume awaited)
    assert RESUMED_SERVES not in story[0] and "no restart left" in story[0], story
    said = StopRecords(str(rendezvous), [entry["endpoint"]], run_id, 3, 0, "sim 3")
    assert said.preempted() is None and said.for_good() is not None


def test_a_peer_file_promising_no_more_is_left_alone(tmp_path: Path, monkeypatch: Any) -> None:
    """A peer's file that promises nothing more than is left (here: 1 left of 3 after the
    first restart, its record saying 1) and one not marked stopped are not rewritten."""
    first_attempt(tmp_path, monkeypatch)
    rendezvous = tmp_path / "rendezvous"
    live = json.loads((rendezvous / "rank_0.json").read_text())
    live.pop("stopped")
    live.pop("stop_record")
    (rendezvous / "rank_1.json").write_text(json.dumps(live))
    before = [(rendezvous / f"rank_{r}.json").read_text() for r in (0, 1)]
    environ = {**LAST, "TORCHELASTIC_MAX_RESTARTS": "2"}  # (1 left: as rank 0's says)
    assert not note_restart_failed(rendezvous, 1, OSError("bind failed"), environ=environ)
    assert [(rendezvous / f"rank_{r}.json").read_text() for r in (0, 1)] == before
