"""`RecentKeys` holds what ``deque(maxlen=size)`` of (simulation id, step) pairs held,
and after `grow(n)` what that deque copied into a ``deque(maxlen=n)`` holds."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from melissa_trainer.stream.recent_keys import RecentKeys


@pytest.mark.parametrize("size", [1, 2, 7, 64])
def test_random_operations_hold_what_a_bounded_deque_holds(size: int) -> None:
    rng = np.random.default_rng(size)
    ours, oracle = RecentKeys(size), deque[tuple[int, int]](maxlen=size)
    step = 0
    for _ in range(3000):
        op = rng.integers(5)
        sid = int(rng.integers(5))
        if op == 0:
            ours.append((sid, step))
            oracle.append((sid, step))
            step += 1
        elif op == 1:  # a batch, up to longer than the ring
            steps = list(range(step, step + int(rng.integers(0, 2 * size + 3))))
            ours.extend_steps(sid, steps)
            oracle.extend((sid, t) for t in steps)
            step += len(steps)
        elif op == 2 and oracle:
            assert ours.pop() == oracle.pop()
        elif op == 3 and rng.integers(20) == 0:  # now and then: hold more from now on
            size += int(rng.integers(0, 5))
            ours.grow(size)
            oracle = deque(oracle, maxlen=size)
        else:
            keys = [(sid, step + i) for i in range(int(rng.integers(0, 4)))]
            ours.extend(keys)
            oracle.extend(keys)
            step += len(keys)
        assert len(ours) == len(oracle)
        assert list(ours) == list(oracle) and ours.maxlen == oracle.maxlen


def test_pop_from_empty_raises_and_size_is_checked() -> None:
    keys = RecentKeys(3)
    with pytest.raises(IndexError, match="pop from an empty RecentKeys"):
        keys.pop()
    with pytest.raises(ValueError, match="size >= 1"):
        RecentKeys(0)
