"""`ReplayWindow`: copies of the last time steps a client sent, bounded in bytes, so that
it can send them again to a trainer restarted from a checkpoint that lacks them
(`melissa_trainer.client.follow`).

PUSH/PULL acknowledges nothing, and ZeroMQ drops what it had queued for a trainer that
died: a step a client sent may never have reached the checkpoint the trainer resumes
from. The window keeps, per time step, a copy of the arrays `send` was given (its
fields, each the caller's array or its part), the oldest dropped first once the copies
hold more than `max_bytes`. Its memory cost is those bytes and a dict entry per step:
at most `max_bytes` plus about 200 bytes per step kept. A step larger than `max_bytes`
is not kept at all. Not thread-safe (the client's thread).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["ReplayWindow"]


class ReplayWindow:
    """The last steps sent, as copies, at most `max_bytes` of array data (module doc).

    Args:
        max_bytes: the bound (> 0): the oldest steps are dropped past it.
    """

    __slots__ = ("max_bytes", "nbytes", "_steps", "dropped")

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"a replay window needs max_bytes > 0, not {max_bytes}")
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._steps: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        #: how many steps were dropped (or never kept) to stay within `max_bytes`
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._steps)

    def __contains__(self, step: int) -> bool:
        return step in self._steps

    def __getitem__(self, step: int) -> dict[str, np.ndarray]:
        return self._steps[step]

    def record(self, step: int, arrays: Mapping[str, Any]) -> None:
        """Keep a copy of `arrays` (the fields `send` was given for `step`, already
        checked by it), replacing any older copy of that step; drop the oldest steps
        past `max_bytes`."""
        copies = {name: np.array(value, copy=True) for name, value in arrays.items()}
        size = sum(a.nbytes for a in copies.values())
        old = self._steps.pop(step, None)
        if old is not None:
            self.nbytes -= sum(a.nbytes for a in old.values())
        if size > self.max_bytes:
            self.dropped += 1
            return
        self._steps[step] = copies
        self.nbytes += size
        while self.nbytes > self.max_bytes:
            _, gone = self._steps.popitem(last=False)
            self.nbytes -= sum(a.nbytes for a in gone.values())
            self.dropped += 1
