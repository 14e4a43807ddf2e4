"""`exit_meeting`: the meeting is a no-op without a process group, and `hold_term`
ignores a SIGTERM within its grace (the launcher's, as another rank exits first), then
gives SIGTERM back to the handler found (the default one ends the process)."""

from __future__ import annotations

import signal
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
        signal.raise_signal(signal.SIGTERM)  # (its Python handler runs before this returns)
        assert seen == [] and signal.getsignal(signal.SIGTERM) is held  # ignored, still held
        now[0] = 31.0  # past the grace: SIGTERM is the previous handler's again
        signal.raise_signal(signal.SIGTERM)  # (its Python handler runs before this returns)
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


MEETING = r"""
import logging, sys, time
from datetime import timedelta
import torch.distributed as dist
from melissa_trainer.trainer.exit_meeting import meet

rank, init, peer = int(sys.argv[1]), sys.argv[2], sys.argv[3]
logging.basicConfig(level=logging.WARNING, format=f"[rank {rank}] %(message)s")
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                        timeout=timedelta(seconds=90))
dist.barrier()  # (the group works)
if rank == 1:
    time.sleep(0 if peer == "gone" else 20)  # gone at once, or late for the meeting
    sys.exit(0)
started = time.monotonic()
met = meet(0, "a source's failure", timeout=3.0)
print(f"met={met} after {time.monotonic() - started:.1f} s", flush=True)
"""


@pytest.mark.e2e
@pytest.mark.timeout(200)
@pytest.mark.parametrize("peer", ["gone", "late"])
def test_the_meeting_is_bounded_when_a_peer_is_gone_or_late(tmp_path: Any, peer: str) -> None:
    """A rank whose peer exited (its connections closed) or does not come within the
    meeting's timeout is not held: it says so at WARNING and goes on to exit."""
    import subprocess
    import sys
    from pathlib import Path

    init = f"file://{tmp_path / 'group'}"
    root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": root, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", MEETING, str(r), init, peer],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )  # fmt: skip
        for r in range(2)
    ]
    try:
        said = ranks[0].communicate(timeout=150)[0]
        ranks[1].communicate(timeout=60)
    finally:
        for p in ranks:
            p.kill()
    assert ranks[0].returncode == 0 and "met=False" in said, said
    assert "[rank 0] rank 0 did not meet every other rank at the end of training" in said, said


@pytest.mark.timeout(60)
def test_the_process_groups_timeout_is_read_from_its_backend(tmp_path: Any) -> None:
    """What ``init_process_group(timeout=...)`` (``InitProcessGroupKwargs``) set."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from melissa_trainer.trainer.exit_meeting import agree_meet_bound, group_timeout

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'g'}", rank=0, world_size=1,
        timeout=timedelta(seconds=77),
    )  # fmt: skip
    try:
        assert group_timeout(torch.device("cpu")) == 77.0
        # (one rank: no meeting, nothing agreed)
        assert agree_meet_bound(0, object(), torch.device("cpu")) is None
    finally:
        dist.destroy_process_group()


class _Bound:
    def __init__(self, bound: float) -> None:
        self.bound = bound

    def stop_bound(self) -> float:
        return self.bound


def _two_ranks(monkeypatch: pytest.MonkeyPatch, other: float, group: float) -> None:
    """`exit_meeting`'s torch.distributed as one rank of two whose peer's bound is
    `other`, under a process group whose timeout is `group` s."""
    from melissa_trainer.trainer import exit_meeting

    def all_reduce(tensor: Any, op: Any = None) -> None:
        tensor.fill_(max(float(tensor.item()), other))

    monkeypatch.setattr(exit_meeting.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(exit_meeting.dist, "get_world_size", lambda *a, **k: 2)
    monkeypatch.setattr(exit_meeting.dist, "all_reduce", all_reduce)
    monkeypatch.setattr(exit_meeting, "group_timeout", lambda device: group)


@pytest.mark.timeout(30)
def test_every_rank_meets_by_the_largest_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from melissa_trainer.trainer.exit_meeting import MEET_TIMEOUT, agree_meet_bound

    _two_ranks(monkeypatch, other=MEET_TIMEOUT + 300.0, group=1800.0)
    assert agree_meet_bound(1, _Bound(5.0), "cpu") == MEET_TIMEOUT + 300.0
    _two_ranks(monkeypatch, other=MEET_TIMEOUT, group=1800.0)
    assert agree_meet_bound(1, _Bound(5.0), "cpu") == MEET_TIMEOUT + 5.0


@pytest.mark.timeout(30)
def test_a_bound_past_the_groups_timeout_is_refused_naming_what_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Said by rank 0; the other ranks raise a quiet copy (`refusal.elsewhere`)."""
    from melissa_trainer.common.refusal import SaidOnRankZero
    from melissa_trainer.trainer.exit_meeting import MEET_TIMEOUT, agree_meet_bound

    _two_ranks(monkeypatch, other=0.0, group=600.0)
    with pytest.raises(ValueError) as refused:
        agree_meet_bound(0, _Bound(500.0), "cpu")
    text = str(refused.value)
    assert f"may wait {MEET_TIMEOUT + 500:g} s" in text, text
    assert "process group's timeout, 600 s" in text and "LauncherTuning.kill_grace" in text
    assert f"InitProcessGroupKwargs(timeout=timedelta(seconds={MEET_TIMEOUT + 560:g}))" in text
    assert not isinstance(refused.value, SaidOnRankZero)
    with pytest.raises(ValueError) as quiet:
        agree_meet_bound(1, _Bound(500.0), "cpu")
    assert isinstance(quiet.value, SaidOnRankZero) and str(quiet.value) == text
    assert agree_meet_bound(0, _Bound(480.0 - MEET_TIMEOUT), "cpu") == 480.0  # (within it)


@pytest.mark.timeout(30)
def test_a_bound_past_the_groups_timeout_is_a_refusal_said_as_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refusal to start (`refusals.REFUSALS`: a `ConfigError`), so that the script's
    ``with refusals_end_the_program():`` says it as one line, status 2, as the other
    refusals. Before, a plain ValueError (no refusal: it escaped the context manager,
    a traceback through the trainer on rank 0): the first `pytest.raises(ConfigError)`
    failed, the ValueError raised through it."""
    from melissa_trainer import refusals_end_the_program
    from melissa_trainer.config.reading import ConfigError
    from melissa_trainer.trainer.exit_meeting import agree_meet_bound

    monkeypatch.delenv("WORLD_SIZE", raising=False)  # (no launcher's store: no mark left)
    _two_ranks(monkeypatch, other=0.0, group=600.0)
    with pytest.raises(ConfigError, match="more than the process group's timeout, 600 s"):
        agree_meet_bound(0, _Bound(500.0), "cpu")
    with pytest.raises(SystemExit) as ended, refusals_end_the_program():
        agree_meet_bound(0, _Bound(500.0), "cpu")
    assert ended.value.code == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and ": error: the ranks' last meeting may wait" in said[0], said
