"""`exit_meeting`: the meeting is a no-op without a process group, and `hold_term`
ignores a SIGTERM within its grace (the launcher's, as another rank exits first), then
gives SIGTERM back to the handler found (the default one ends the process)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from melissa_trainer.trainer.exit_meeting import hold_term, meet


def test_one_process_meets_no_one() -> None:
    assert meet(0, "a source's failure") is True


def test_hold_term_is_only_for_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert hold_term() is False


@pytest.mark.timeout(30)
def test_a_sigterm_within_the_grace_is_ignored_then_the_previous_handler_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    seen: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    now = [0.0]
    try:
        assert hold_term(grace=30.0, clock=lambda: now[0]) is True
        held: Any = signal.getsignal(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # (Python runs the handler at the next bytecode boundary)
        assert seen == [] and signal.getsignal(signal.SIGTERM) is held  # ignored, still held
        now[0] = 31.0  # past the grace: SIGTERM is the previous handler's again
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        assert seen == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is not held
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.timeout(60)
def test_the_polled_barrier_off_gloo_completes_and_is_bounded(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The barrier used off gloo (NCCL: no monitored barrier there), here on a gloo
    group of one: it completes; a work that never completes raises TimeoutError."""
    import torch
    import torch.distributed as dist

    from melissa_trainer.trainer import exit_meeting

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'g'}", rank=0, world_size=1)
    try:
        assert exit_meeting._polled_barrier(5.0, torch.device("cpu")) is True
    finally:
        dist.destroy_process_group()

    class Never:
        def is_completed(self) -> bool:
            return False

    monkeypatch.setattr(exit_meeting.dist, "all_reduce", lambda *a, **k: Never())
    with pytest.raises(TimeoutError, match="not every rank came within 0.2 s"):
        exit_meeting._polled_barrier(0.2, torch.device("cpu"))
