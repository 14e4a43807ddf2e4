"""A torchrun restart reads the rendezvous records as its own failed attempt's only
when they are its own launch's (`stream.launch_identity`, `trainer.launch_join`).

A launch's first attempt that fails before its receivers publish (its Accelerator's
process group that does not form, a transient NCCL or store error, a rank OOM-killed in
its set-up or resume) leaves the directory as the previous launch left it. Its restart
(``TORCHELASTIC_RESTART_COUNT`` 1) read that launch's records: they held no launch
identity (their run id is the earlier trainer's, the same in every file), so
`stream.final_stop.read_final_stop`'s "every rank's file names one run" held and
`stream.restart_failed.note_restart_failed` rewrote them. Failed before (review hrev11
F1, F2): the restart was refused (`RestartAfterFinalStop`), and the preempted records
were rewritten as ``error``.

The oracle is the sequence the test runs, under a launcher's agent store (a
``TCPStore`` served here, as torchrun's: new for the launch, kept across its restarts):
launch 1's records are written (the form a receiver writes, as
tests/trainer/test_restart_final_stop.py writes them), then launch 2 runs its attempt
0, whose `make_accelerator` fails before anything is published, then its attempt 1. A
record naming launch 2 (the id read from the store by the test) is still its own.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stop_records import failing_trainer
from test_restart_final_stop import write_records
from torch.distributed import TCPStore

from melissa_trainer.hooks import Hook
from melissa_trainer.trainer.final_restart import RestartAfterFinalStop
from melissa_trainer.trainer.launch_join import LAUNCH_KEY

pytestmark = pytest.mark.timeout(60)

LAUNCH_2 = {"TORCHELASTIC_RUN_ID": "launch-2", "TORCHELASTIC_MAX_RESTARTS": "1",
            "WORLD_SIZE": "2", "RANK": "0"}  # fmt: skip


class TransientSetUpError(RuntimeError):
    """What attempt 0's process group raised (a store or NCCL hiccup)."""


def _accelerator_fails(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    import melissa_trainer.trainer.loop as loop

    def built(*args: Any, **kwargs: Any) -> None:
        raise error

    monkeypatch.setattr(loop, "make_accelerator", built)


@pytest.fixture
def agent_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[TCPStore]:
    """Launch 2's agent store, served in this process as torchrun serves it (the launch
    id noted meanwhile is reset after the test: tests/conftest.py)."""
    timeout = datetime.timedelta(seconds=30)
    store = TCPStore("127.0.0.1", 0, None, True, timeout=timeout, wait_for_workers=False)
    env = {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(store.port)}  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield store
    del store  # (its server closes with it)


def _attempt(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    for name, value in {**LAUNCH_2, "TORCHELASTIC_RESTART_COUNT": str(count)}.items():
        monkeypatch.setenv(name, value)


def _attempt_0_fails_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resume: Any) -> None:
    _attempt(monkeypatch, 0)
    _accelerator_fails(monkeypatch, TransientSetUpError("store: connection reset (transient)"))
    with pytest.raises(TransientSetUpError):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint=resume)


@pytest.mark.parametrize("resume", ["latest", None], ids=["resumed", "fresh"])
def test_an_earlier_launchs_final_stop_does_not_refuse_a_new_launchs_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_store: TCPStore, resume: str | None
) -> None:
    """Launch 1 stopped on a NaN (its rank 1: nonfinite). The user fixed the solver and
    started launch 2 with ``--max_restarts 1`` (resumed, or afresh: then no checkpoint
    and no sample of launch 1 is taken again). Attempt 0 fails transiently in its set-up;
    torchrun's restart 1 must set up (its Accelerator is reached), not be refused as
    "the failed run stopped for good" -- the failed run was launch 1, by hand."""
    write_records(tmp_path / "rendezvous", ("error", "nonfinite"), ("run-a", "run-a"))
    _attempt_0_fails_early(tmp_path, monkeypatch, resume)
    _attempt(monkeypatch, 1)
    _accelerator_fails(monkeypatch, AssertionError("the Accelerator was built"))
    with pytest.raises(AssertionError, match="the Accelerator was built"):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint=resume)


def test_a_new_launchs_failed_restart_leaves_an_earlier_launchs_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_store: TCPStore
) -> None:
    """Launch 1 was preempted (its records promise a resume, which its solvers follow).
    Launch 2, a person's resume with ``--max_restarts 1``, fails in its set-up twice,
    before any receiver published. Its failure is no fact about launch 1's stop: the
    records, launch 1's, stay byte for byte (a further resume by hand may still come);
    they were rewritten to ``error`` with "the restarted run (restart 1 of 1) failed
    before its receiver of rank 0 started", a restart launch 1 never had."""
    before = write_records(tmp_path / "rendezvous", ("preempted", "preempted"), ("run-a",) * 2)
    _attempt_0_fails_early(tmp_path, monkeypatch, "latest")
    _attempt(monkeypatch, 1)
    _accelerator_fails(monkeypatch, TransientSetUpError("store: connection reset again"))
    with pytest.raises(TransientSetUpError):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint="latest")
    after = [(tmp_path / "rendezvous" / f"rank_{r}.json").read_bytes() for r in (0, 1)]
    assert after == before, after


def _name_launch(rendezvous: Path, launch: str) -> None:
    """The records of `rendezvous` as written by `launch` (its ``launch`` field)."""
    for rank in (0, 1):
        path = rendezvous / f"rank_{rank}.json"
        entry = json.loads(path.read_text())
        entry["stop_record"]["launch"] = launch
        path.write_text(json.dumps(entry))


def test_this_launchs_final_stop_still_refuses_its_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_store: TCPStore
) -> None:
    """Launch 2's own attempt 0 stopped on a NaN (records naming launch 2, the id its
    store holds): its restart is refused before its set-up, as without a store."""
    _attempt_0_fails_early(tmp_path, monkeypatch, "latest")
    launch = bytes(agent_store.get(LAUNCH_KEY)).decode()
    write_records(tmp_path / "rendezvous", ("error", "nonfinite"), ("run-b", "run-b"))
    _name_launch(tmp_path / "rendezvous", launch)
    _attempt(monkeypatch, 1)
    _accelerator_fails(monkeypatch, AssertionError("the Accelerator was built"))
    with pytest.raises(RestartAfterFinalStop, match="nonfinite: nonfinite on rank 1"):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint="latest")


def test_this_launchs_failed_restart_rewrites_its_preempted_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_store: TCPStore
) -> None:
    """Launch 2's own attempt 0 was preempted (records naming launch 2), its restart 1
    of 1 fails in its set-up: both records now say no restart is left, the launch kept."""
    _attempt_0_fails_early(tmp_path, monkeypatch, "latest")
    launch = bytes(agent_store.get(LAUNCH_KEY)).decode()
    write_records(tmp_path / "rendezvous", ("preempted", "preempted"), ("run-b",) * 2)
    _name_launch(tmp_path / "rendezvous", launch)
    _attempt(monkeypatch, 1)
    _accelerator_fails(monkeypatch, TransientSetUpError("store: connection reset again"))
    with pytest.raises(TransientSetUpError):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint="latest")
    for rank in (0, 1):
        entry = json.loads((tmp_path / "rendezvous" / f"rank_{rank}.json").read_text())
        record = entry["stop_record"]
        assert record["launch"] == launch, record
        assert record["reason"]["code"] == "error", record
        assert record["reason"]["restarts_left"] == 0, record
