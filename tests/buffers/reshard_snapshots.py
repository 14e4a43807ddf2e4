"""Old ranks' buffer snapshots for the resharding tests (`melissa_trainer.buffers.reshard`):
each sample carries a unique ``uid`` (`sample`), an old rank's buffer is filled, trained
from and its pending batches taken (`old_rank`), and the uids and draws it holds are read
back from a snapshot's arrays (`uids`, `reservoir_draws`), independently of the function
under test."""

from __future__ import annotations

from typing import Any

import numpy as np

from melissa_trainer.buffers import Buffer, FIFOBuffer, FIROBuffer, RateLimiter, ReservoirBuffer

CAPACITY = 100  # holds what 3 old ranks held (test_reshard_capacity.py uses SMALL)

#: name -> (class, keyword arguments, rate limited)
KINDS: dict[str, tuple[type[Buffer], dict[str, Any], bool]] = {
    "fifo": (FIFOBuffer, {}, False),
    "firo": (FIROBuffer, {}, False),
    "reservoir": (ReservoirBuffer, {}, False),
    "fifo-retain": (FIFOBuffer, {"retain": True}, False),
    "firo-retain": (FIROBuffer, {"retain": True}, False),
    "reservoir-limited": (ReservoirBuffer, {}, True),
    "reservoir-max-reuse": (ReservoirBuffer, {"max_sample_reuse": 3}, False),
    "reservoir-choices": (ReservoirBuffer, {"draw_choices": 2, "evict_choices": 3}, False),
    "fifo-limited": (FIFOBuffer, {}, True),
}


def make(name: str, seed: int = 0, capacity: int = CAPACITY) -> Buffer:
    cls, kwargs, limited = KINDS[name]
    limiter = RateLimiter(2.0, 10_000.0, 4) if limited else None
    return cls(capacity, 2, seed=seed, rate_limiter=limiter, **kwargs)


def sample(uid: int) -> dict[str, np.ndarray]:
    return {"x": np.full(32, uid, np.float32), "uid": np.array(uid, np.int64)}  # x: "large"


def old_rank(
    name: str,
    r: int,
    n: int = 30,
    trained: int = 3,
    pending: int = 2,
    batch: int = 4,
    capacity: int = CAPACITY,
) -> tuple[tuple[dict[str, np.ndarray], dict[str, Any]], list[list[dict[str, np.ndarray]]]]:
    """A buffer of old rank `r` after `n` puts, `trained` batches trained and `pending`
    batches taken: its snapshot and pending batches."""
    buf = make(name, seed=100 + r, capacity=capacity)
    for i in range(n):
        buf.put(sample(1000 * r + i))
    for _ in range(trained):
        buf.get_batch(batch)
    taken = [buf.get_batch(batch) for _ in range(pending)]
    return buf.state_dict(), taken


def uids(arrays: dict[str, np.ndarray], prefix: str = "s") -> list[int]:
    return [int(v) for k, v in arrays.items() if k.startswith(prefix) and k.endswith("/uid")]


def reservoir_draws(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> dict[int, int]:
    c = meta["contents"]
    return {int(arrays[f"s{s}/uid"]): c["draws"][s] for s in c["undrawn"] + c["drawn"]}
