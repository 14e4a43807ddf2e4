"""The samples a checkpoint's buffer or pending-batch arrays hold, by their ``index``
(`held`): read by tests/checkpoint/test_reshard_load.py and test_reshard_real_ranks.py."""

from __future__ import annotations

import numpy as np


def held(arrays: dict[str, np.ndarray]) -> list[int]:
    """The ``index`` of every sample of a buffer snapshot's (or pending file's) arrays."""
    return [int(v) for k, v in arrays.items() if k.endswith("/index")]
