"""A review finding (hrev10), fixed by eeb806d4 (failed before it): ae1f1b11 told the source
of a restarted attempt's set-up failure only around `make_accelerator`
(`OnlineTrainer.__init__`'s try, `starting.setup_failed`); the rest of the set-up before
`train()` was not covered. The first collective after the group forms is DDP's broadcast
in `acc.prepare` (where a restart whose peer died, or whose NCCL/gloo link breaks, fails),
then `claim_output_dir`'s broadcast: a restarted attempt failing there left the failed
run's record promising a restart, and on the last attempt every waiting client waits out
its ``follow_timeout`` for a restart that never comes, the case 83ffc843/ae1f1b11 set out
to close.

Harness and oracle as tests/trainer/test_restart_failed_early.py's set-up test (torchrun's
variables set by the test, the record read as JSON), the failure raised one call later:
in ``Accelerator.prepare`` instead of in `make_accelerator`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import accelerate
import pytest
from stop_records import failing_trainer
from test_restart_failed_early import FailingHook, attempt, entry_of

pytestmark = pytest.mark.timeout(120)


def test_a_last_restart_failing_in_prepare_says_none_is_left(
    tmp_path: Path, monkeypatch: Any
) -> None:
    attempt(monkeypatch, 0, 1)
    with pytest.raises(RuntimeError, match="first attempt"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest").train()
    attempt(monkeypatch, 1, 1)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Connection reset by peer (DDP's first broadcast)")

    monkeypatch.setattr(accelerate.Accelerator, "prepare", broken)
    with pytest.raises(RuntimeError, match="Connection reset by peer"):
        failing_trainer(tmp_path, FailingHook(), resume_from_checkpoint="latest")
    reason = entry_of(tmp_path)["stop_record"]["reason"]
    assert reason["restarts_left"] == 0, reason  # today 1: a restart still promised
