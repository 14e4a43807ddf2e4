"""Review hrev11 (of 3914d6af..00d3489d): a torchrun restart reads the rendezvous
records as its own failed attempt's, but its first attempt may have published none.

A launch's first attempt that fails before its receivers publish (its Accelerator's
process group that does not form, a transient NCCL or store error, a rank OOM-killed in
its set-up or resume) leaves the directory as the previous launch left it. Its restart
(``TORCHELASTIC_RESTART_COUNT`` 1) then reads that launch's records: the records hold
no launch identity (their run id is the earlier trainer's, the same in every file), so
`stream.final_stop.read_final_stop`'s "every rank's file names one run" holds and
`stream.restart_failed.note_restart_failed` rewrites them, although the module
docstrings promise that "a record of another launch must not stop this one".

The oracle is the sequence the test runs: launch 1's records are written (the form a
receiver writes, as tests/trainer/test_restart_final_stop.py writes them), then launch 2
(``TORCHELASTIC_RUN_ID`` "launch-2") runs its attempt 0, whose `make_accelerator` fails
before anything is published, then its attempt 1. Reproductions only: xfail(strict).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from stop_records import failing_trainer
from test_restart_final_stop import write_records

from melissa_trainer.hooks import Hook
from melissa_trainer.trainer.final_restart import RestartAfterFinalStop

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


def _attempt(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    for name, value in {**LAUNCH_2, "TORCHELASTIC_RESTART_COUNT": str(count)}.items():
        monkeypatch.setenv(name, value)


def _attempt_0_fails_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resume: Any) -> None:
    _attempt(monkeypatch, 0)
    _accelerator_fails(monkeypatch, TransientSetUpError("store: connection reset (transient)"))
    with pytest.raises(TransientSetUpError):
        failing_trainer(tmp_path, Hook(), resume_from_checkpoint=resume)


@pytest.mark.xfail(
    strict=True,
    raises=RestartAfterFinalStop,
    reason="hrev11 F1: an earlier launch's nonfinite records refuse the restart of a new "
    "launch whose attempt 0 failed before publishing (records carry no launch identity)",
)
@pytest.mark.parametrize("resume", ["latest", None], ids=["resumed", "fresh"])
def test_an_earlier_launchs_final_stop_does_not_refuse_a_new_launchs_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resume: str | None
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


@pytest.mark.xfail(
    strict=True,
    reason="hrev11 F2: a new launch's failed restart rewrites an earlier launch's "
    "preempted records (both ranks, since eeb806d4) as its own 'restart 1 of 1' error",
)
def test_a_new_launchs_failed_restart_leaves_an_earlier_launchs_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
