"""A preemption (a signal, the launcher's death) agreed at the same stop agreement as a
source's failure: the failure is the stronger fact, on every rank alike. Every rank ends
as for the failure (exit status 1, never `Preempted`'s 143), with the checkpoint of that
step, and its line names the preemption too, which that checkpoint covers.

Before (`SourceFailure.at_agreement`), the failure won too but its lines never said the
signal: a user who sent SIGTERM read of a study's failure only, and could not tell that
the stop they asked for was taken.

Two ranks in one process: each a thread with its own `StopSync`, whose all-reduce is
the threads' (tests/core/test_stop_sync_source_failed.py's `TwoRanks`)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from melissa_trainer.core import stop_sync
from melissa_trainer.core.stop_sync import StopSync
from melissa_trainer.sources.source import SourceError
from melissa_trainer.trainer.preempted import Preempted
from melissa_trainer.trainer.rank_failure import RankFailed
from melissa_trainer.trainer.source_failure import SourceFailure

STUDY = "the simulation study failed: simulation 1 failed"


class Rank(SimpleNamespace):
    """What `SourceFailure` and the failure's end read of rank `rank` of two, at step 7:
    its source fails (its `prefetch` raises) when `fails`; its save writes the
    checkpoint of step 7 (collective in a real run)."""

    def __init__(self, tmp_path: Path, rank: int, fails: bool) -> None:
        def prefetch(n: int, interrupted: Any = None) -> int:
            if fails:
                raise SourceError(STUDY)
            return n

        def save() -> Path:
            self.state.last_save_step = 7
            return tmp_path / "checkpoints" / "checkpoint-7"

        super().__init__(
            num_processes=2, process_index=rank, run_id="run", is_main_process=rank == 0,
            args=SimpleNamespace(output_dir=str(tmp_path)),
            checkpoint_root=tmp_path / "checkpoints",
            stop_sync=SimpleNamespace(distributed=True),
            state=SimpleNamespace(global_step=7, last_save_step=0),
            dataset=SimpleNamespace(prefetch=prefetch, num_pending=1),
            source=SimpleNamespace(note_stop=lambda *a: None), save_checkpoint=save,
        )  # fmt: skip


def end_two_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signums: tuple[int, int]
) -> list[Any]:
    """Rank 0's source fails; rank r caught the signal `signums[r]` (0: none); both agree
    once, as the loop does, and end as it does (`at_agreement`, then `said` for a
    `SourceError`). Returns what each rank raises."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "core"))
    from test_stop_sync_source_failed import TwoRanks

    group = TwoRanks()
    monkeypatch.setattr(stop_sync.dist, "all_reduce", group.all_reduce)
    raised: list[Any] = [None, None]

    def rank(r: int) -> None:
        group.local.rank = r
        failure = SourceFailure(Rank(tmp_path, r, fails=r == 0))  # type: ignore[arg-type]
        sync = StopSync(torch.device("cpu"), 1)
        sync.distributed = True
        in_hand = failure.prefetch(1)
        _, _, signum = sync.agree(False, in_hand, signums[r], source_failed=failure.code)
        error = failure.at_agreement(sync.source_failed, signum, lambda: None)
        raised[r] = failure.said(error, lambda: None) if isinstance(error, SourceError) else error

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(e is not None for e in raised), raised
    return raised


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signals", [(0, 15), (15, 0), (2, 15)])
def test_a_signal_agreed_with_a_failure_ends_every_rank_as_the_failure_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any, signals: tuple[int, int]
) -> None:
    caplog.set_level(logging.ERROR, "melissa_trainer")
    zero, one = end_two_ranks(tmp_path, monkeypatch, signals)
    # every rank fails with exit status 1: neither is a preemption (143)
    assert isinstance(zero, SourceError) and isinstance(one, RankFailed), (zero, one)
    assert not isinstance(zero, Preempted) and not isinstance(one, Preempted)
    assert zero.code == one.code == 1
    # each rank's line names the failure, the signal (the largest: SIGTERM) and the checkpoint
    said = [r.getMessage() for r in caplog.records]
    name = signal.Signals(max(signals)).name
    also = f"{name} came at the same stop (a preemption): the checkpoint of the failure covers it"
    checkpoint = f"checkpoint {tmp_path / 'checkpoints' / 'checkpoint-7'} holds this step"
    (line0,) = [x for x in said if x.startswith("training stopped at step 7")]
    (line1,) = [x for x in said if x.startswith("rank 0 failed")]
    assert line0.startswith(f"training stopped at step 7: {STUDY}; {also}; {checkpoint}"), line0
    assert f"rank 1 stops at step 7 with it, as every rank; {also}; {checkpoint}" in line1, line1


@pytest.mark.timeout(60)
def test_a_failure_agreed_without_a_signal_names_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    caplog.set_level(logging.ERROR, "melissa_trainer")
    zero, one = end_two_ranks(tmp_path, monkeypatch, (0, 0))
    assert isinstance(zero, SourceError) and isinstance(one, RankFailed)
    assert not [r for r in caplog.records if "preemption" in r.getMessage()]
