"""The ranks' stop agreement carries the lowest rank that asked to stop
(`StopSync.stop_rank`), in the integer that said whether any did: every rank reads it
from the same agreement, at no extra collective, and the end of the run names that
rank's hook (`trainer.stop_asked`).

Two ranks in one process, as tests/core/test_stop_sync_source_failed.py makes them:
each a thread with its own `StopSync`, whose all-reduce applies the op that
`StopSync` names (MAX, as a real group does; SUM or MIN too) over both threads' flags:
a fake that reduced by MAX whatever the op named let a SUM in `stop_sync` pass."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch

from melissa_trainer.core import stop_sync
from melissa_trainer.core.stop_sync import StopSync

pytestmark = pytest.mark.timeout(60)


#: what each op a caller may name does to two ranks' tensors (another op: a KeyError)
REDUCE: dict[Any, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    torch.distributed.ReduceOp.MAX: torch.maximum,
    torch.distributed.ReduceOp.MIN: torch.minimum,
    torch.distributed.ReduceOp.SUM: torch.add,
}


class _Done:
    def wait(self) -> None:
        pass


def agree(monkeypatch: pytest.MonkeyPatch, asked: tuple[bool, bool]) -> list[Any]:
    """Each rank r agrees once, asking to stop when `asked[r]`; each rank's (whether
    any asked, `stop_rank`)."""
    barrier, flags = threading.Barrier(2, timeout=30), {}
    local = threading.local()

    def all_reduce(tensor: torch.Tensor, op: Any = None, async_op: bool = False) -> Any:
        flags[local.rank] = tensor
        barrier.wait()
        if local.rank == 0:  # (the op the caller names, as a real group reduces)
            top = REDUCE[op](flags[0], flags[1])
            for t in flags.values():
                t.copy_(top)
        barrier.wait()
        return _Done()

    monkeypatch.setattr(stop_sync.dist, "all_reduce", all_reduce)
    results: list[Any] = [None, None]

    def rank(r: int) -> None:
        local.rank = r
        sync = StopSync(torch.device("cpu"), 1)
        sync.distributed, sync.rank, sync._world = True, r, 2  # (the threads' group)
        stop, _, _ = sync.agree(asked[r], 4)
        results[r] = (stop, sync.stop_rank)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r is not None for r in results), results
    return results


@pytest.mark.parametrize(
    ("asked", "expected"),
    [((False, True), (True, 1)), ((True, False), (True, 0)), ((True, True), (True, 0)),
     ((False, False), (False, None))],
)  # fmt: skip
def test_every_rank_reads_the_lowest_rank_that_asked(
    monkeypatch: pytest.MonkeyPatch, asked: tuple[bool, bool], expected: tuple[bool, Any]
) -> None:
    assert agree(monkeypatch, asked) == [expected, expected]


def test_one_process_that_asked_is_rank_0() -> None:
    sync = StopSync(torch.device("cpu"), 1)
    assert sync.agree(True, 4)[0] and sync.stop_rank == 0
    assert not sync.agree(False, 4)[0] and sync.stop_rank is None
