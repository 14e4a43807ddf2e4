"""The ranks' stop agreement carries a source's failure (`StopSync`'s ``source_failed``):
every rank reads, from the same agreement, the largest rank whose source failed, so that
all stop at the same step and save a checkpoint together (`trainer.source_failure`).

Two ranks in one process: each a thread with its own `StopSync`, whose all-reduce is a
MAX over both threads' flags (a barrier, as a collective is), not a process group."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from melissa_trainer.core import stop_sync
from melissa_trainer.core.stop_sync import StopSync

CPU = torch.device("cpu")


class TwoRanks:
    """`dist.all_reduce(op=MAX)` for two threads: each puts its tensor, the first to
    arrive after both did writes the maximum into both."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=30)
        self.tensors: dict[int, torch.Tensor] = {}
        self.local = threading.local()

    def all_reduce(self, tensor: torch.Tensor, op: Any = None, async_op: bool = False) -> Any:
        self.tensors[self.local.rank] = tensor
        self.barrier.wait()
        if self.local.rank == 0:
            top = torch.maximum(self.tensors[0], self.tensors[1])
            for t in self.tensors.values():
                t.copy_(top)
        self.barrier.wait()

        class Done:
            def wait(self) -> None:
                pass

        return Done()


def agree_on_two_ranks(
    monkeypatch: pytest.MonkeyPatch, failed: tuple[int, int]
) -> list[tuple[Any, int | None, int]]:
    """Each rank r agrees once, saying `failed[r]` as its ``source_failed`` (its rank + 1
    when its source failed, 0 when not); returns each rank's (agreement,
    `source_failed`, `most`)."""
    group = TwoRanks()
    monkeypatch.setattr(stop_sync.dist, "all_reduce", group.all_reduce)
    results: list[Any] = [None, None]

    def rank(r: int) -> None:
        group.local.rank = r
        sync = StopSync(CPU, 1)
        sync.distributed = True  # (the all-reduce is the threads')
        agreement = sync.agree(False, 4 - r, 0, batches_in_hand=4 - r, source_failed=failed[r])
        results[r] = (agreement, sync.source_failed, sync.most)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r is not None for r in results), results
    return results


@pytest.mark.timeout(60)
def test_a_failure_on_rank_0_reaches_rank_1_at_the_same_agreement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zero, one = agree_on_two_ranks(monkeypatch, (1, 0))  # rank 0's source failed
    assert zero[1] == one[1] == 0  # every rank reads that rank 0's failed
    assert zero == one == ((False, 3, 0), 0, 4)  # the other numbers unchanged by it


@pytest.mark.timeout(60)
def test_the_largest_failed_rank_is_agreed_and_none_when_no_source_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    zero, one = agree_on_two_ranks(monkeypatch, (1, 2))
    assert zero[1] == one[1] == 1
    zero, one = agree_on_two_ranks(monkeypatch, (0, 0))
    assert zero[1] is None and one[1] is None


def test_one_process_reads_its_own_failure() -> None:
    sync = StopSync(CPU, 1)
    assert sync.agree(False, 2, source_failed=1) == (False, 2, 0)
    assert sync.source_failed == 0
    sync.agree(False, 2)
    assert sync.source_failed is None  # (each agreement says it anew)
