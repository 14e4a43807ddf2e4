"""A reservoir's pending batch across a resize: its samples must still be trained.

A full reservoir evicts a drawn sample at each put, and a sample taken into a pending
batch counts as drawn: it can be evicted while its batch waits to be trained. On the
same number of ranks the checkpoint's pending batch is trained after the resume, so the
sample is trained. On another number of ranks `buffers.reshard.share` undoes the pending
batches; a taken sample that the buffer no longer holds is held again, undrawn, by one
new rank (it was once dropped: taken, never trained, and gone). Issue 33 asks for the
union of the buffers *and untrained pending batches* held exactly once after the resize.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from melissa_trainer.buffers import ReservoirBuffer
from melissa_trainer.buffers.reshard import share
from melissa_trainer.core.dataset import StreamDataset

pytestmark = pytest.mark.timeout(60)

Snapshot = tuple[dict[str, np.ndarray], dict[str, Any]]


def sample(uid: int) -> dict[str, np.ndarray]:
    return {"x": np.full(3, uid, np.float32), "uid": np.asarray(uid, np.int64)}


def evicting_rank() -> tuple[Snapshot, list[list[dict[str, np.ndarray]]], set[int]]:
    """A full reservoir of 4 whose pending batch's samples were both evicted after
    their draw: its snapshot, pending batches and the uids it still holds."""
    buffer = ReservoirBuffer(4, watermark=1, seed=0)
    for uid in range(4):
        buffer.put(sample(uid), 0)
    dataset = StreamDataset(buffer, 2)
    assert dataset.prefetch(1) == 1
    pending = [list(dataset.peek_pending() or [])]
    taken = {int(s["uid"]) for s in pending[0]}
    buffer.put(sample(4), 0)  # full: each put evicts a drawn sample, here the taken ones
    buffer.put(sample(5), 0)
    arrays, meta = buffer.state_dict()
    held_now = {int(v) for k, v in arrays.items() if k.endswith("/uid")}
    assert taken.isdisjoint(held_now) and len(taken) == 2  # the setup: both evicted
    return (arrays, meta), pending, held_now


@pytest.mark.parametrize(("k", "m"), [(2, 3), (3, 2), (2, 4)])
def test_a_pending_sample_evicted_before_the_checkpoint_is_held_after_a_resize(
    k: int, m: int
) -> None:
    snapshot, pending, held_now = evicting_rank()
    taken = {int(s["uid"]) for s in pending[0]}
    # k old ranks, the others empty (1 new rank could not hold the 6 undrawn samples
    # in 4 places: refused, see below)
    others = [ReservoirBuffer(4, watermark=1, seed=r).state_dict() for r in range(1, k)]
    snaps, pend = [snapshot, *others], [pending] + [[] for _ in others]
    shares = [share(snaps, pend, r, m) for r in range(m)]
    held = [int(v) for a, _ in shares for key, v in a.items() if key.endswith("/uid")]
    assert sorted(held) == sorted(held_now | taken)

    # held again undrawn, its departure undone: sum(hist) == evicted, held == put - evicted
    metas = [meta for _, meta in shares]
    evicted = sum(meta["evicted"] for meta in metas)
    assert evicted == snapshot[1]["evicted"] - 2 == 0
    assert sum(n for meta in metas for n in meta["reuse_histogram"].values()) == evicted
    assert len(held) == sum(meta["put"] for meta in metas) - evicted
    # each new rank's buffer serves its restored samples after close: they are trained
    drained: list[int] = []
    for arrays, meta in shares:
        buf = ReservoirBuffer(4, watermark=1, seed=9)
        buf.load_state_dict(arrays, meta)
        buf.close()
        while batch := buf.get_batch(3):
            drained += [int(s["uid"]) for s in batch]
    assert taken <= set(drained)


def test_the_same_ranks_refuse_an_overfull_reservoir_naming_buffer_size() -> None:
    snapshot, pending, _ = evicting_rank()
    with pytest.raises(ValueError, match="buffer_size 4: .*resume with buffer_size 6 or more"):
        share([snapshot], [pending], 0, 1)  # 4 held undrawn + 2 restored in 4 places
    arrays, meta = share([snapshot], [pending], 0, 1, capacity=6)  # the advice works
    buf = ReservoirBuffer(6, watermark=1, seed=9)
    buf.load_state_dict(arrays, meta)
    assert len(buf) == 6
