"""A `Study`'s receivers write their rendezvous files (and stop records) in
``{output_dir}/rendezvous`` by default; the trainer tells the study its ``output_dir``
first thing (`Source.note_output_dir`), before its `Accelerator`, so that a restarted
attempt failing in its set-up (`starting.setup_failed`) or refused after a final stop
(`final_restart`) rewrites the failed run's records there (`stream.restart_failed`).
Found by review hrev10: the study learned the directory only in `Study.configure`, after
`claim_output_dir`, and the records kept promising a restart (their clients waiting out
``follow_timeout``). The tests of ae1f1b11 gave the `StreamSource` an explicit
``rendezvous_dir`` (tests/stop_records.py), so they could not see it.

Oracle: the failed run's records (what the first attempt wrote) put by hand in
``{output_dir}/rendezvous``; torchrun's variables for restart 1 of 1; `make_accelerator`
replaced by one raising torch's error, as in tests/trainer/test_restart_failed_early.py
(or failing loudly: a final stop's refusal comes before it).

A restarted attempt refused its ``output_dir`` (`OutputDirLocked`: another trainer holds
it) rewrites nothing there: the records are the holder's run's (review hrev11: with the
rendezvous known before the claim, the refused attempt rewrote the holder's promise)."""

from __future__ import annotations

import fcntl
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from stop_records import record_trainer
from test_restart_failed_early import attempt
from test_restart_final_stop import RESTART, no_accelerator, write_records

from melissa_trainer import StreamSource, Study
from melissa_trainer.launcher import Launcher, LocalBackend
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.trainer.final_restart import RestartAfterFinalStop
from melissa_trainer.trainer.lock_holder import LOCK_FILE, OutputDirLocked

pytestmark = pytest.mark.timeout(120)

ENDPOINT = "tcp://127.0.0.1:9"


def promised(rendezvous: Path) -> bytes:
    """A failed run's rank 0 record in `rendezvous`, promising 1 restart; its bytes."""
    rendezvous.mkdir(parents=True)
    reason = {"code": "error", "message": "training failed", "restarts_left": 1}
    record = {"version": 1, "run_id": "run-a", "reason": reason, "finished": [], "byes": [],
              "complete": True}  # fmt: skip
    entry = {"stopped": True, "endpoint": ENDPOINT, "stop_record": record}
    (rendezvous / "rank_0.json").write_text(json.dumps(entry))
    return (rendezvous / "rank_0.json").read_bytes()


def test_a_studys_last_restart_whose_set_up_fails_says_none_is_left(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import melissa_trainer.trainer.loop as loop

    rendezvous = tmp_path / "out" / "rendezvous"
    promised(rendezvous)
    attempt(monkeypatch, 1, 1)

    def no_group(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Gloo connectFullMesh failed: Connection refused")

    monkeypatch.setattr(loop, "make_accelerator", no_group)
    launcher = Launcher([sys.executable, "-c", "pass"], [{"a": 0.0}], 1, backend=LocalBackend())
    with pytest.raises(RuntimeError, match="connectFullMesh"):
        record_trainer(tmp_path, Study(launcher, StreamSource()))
    said = json.loads((rendezvous / "rank_0.json").read_text())["stop_record"]["reason"]
    assert said["restarts_left"] == 0, said  # (before: 1, the restart still promised)
    assert said["message"].startswith(
        "the restarted run (restart 1 of 1) failed before its receiver of rank 0 started; "
        "no restart left"
    ), said


def test_a_studys_restart_after_a_final_stop_rewrites_its_peers_promise(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The final stop (rank 1's ``nonfinite``) refuses the restart before its set-up;
    rank 0's record, which promised it, then promises none (a `Predictor` reads it)."""
    for name, value in RESTART.items():
        monkeypatch.setenv(name, value)
    before = write_records(tmp_path / "out" / "rendezvous", ("error", "nonfinite"),
                           ("run-a", "run-a"))  # fmt: skip
    no_accelerator(monkeypatch)
    launcher = Launcher([sys.executable, "-c", "pass"], [{"a": 0.0}], 1, backend=LocalBackend())
    with pytest.raises(RestartAfterFinalStop):
        record_trainer(tmp_path, Study(launcher, StreamSource()))
    rendezvous = tmp_path / "out" / "rendezvous"
    assert (rendezvous / "rank_1.json").read_bytes() == before[1]  # (the final record)
    said = json.loads((rendezvous / "rank_0.json").read_text())["stop_record"]["reason"]
    assert said["code"] == "error" and said["restarts_left"] == 0, said  # (before: 1)


@pytest.mark.parametrize("explicit", [False, True], ids=["study-default", "stream-names-it"])
def test_a_restart_refused_its_output_dir_leaves_the_holders_records(
    tmp_path: Path, monkeypatch: Any, explicit: bool
) -> None:
    """Restart 1 of 1, refused: the holder's record keeps its promise, byte for byte,
    whether the study's rendezvous is its default or one its stream names (the holder
    may be the same command, naming the same folder)."""
    rendezvous = tmp_path / "out" / "rendezvous"
    before = promised(rendezvous)
    attempt(monkeypatch, 1, 1)
    stream = StreamSource(ReceiverConfig(rendezvous_dir=rendezvous)) if explicit else None
    launcher = Launcher([sys.executable, "-c", "pass"], [{"a": 0.0}], 1, backend=LocalBackend())
    # (another trainer's flock: another open file description, refused like a process's)
    with open(tmp_path / "out" / LOCK_FILE, "a") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with pytest.raises(OutputDirLocked):
            record_trainer(tmp_path, Study(launcher, stream))
    assert (rendezvous / "rank_0.json").read_bytes() == before
