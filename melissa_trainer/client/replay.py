"""`ReplayWindow`: copies of the last time steps a client sent, bounded in bytes, so that
it can send them again to a trainer restarted from a checkpoint that lacks them
(`melissa_trainer.client.follow`).

PUSH/PULL acknowledges nothing, and ZeroMQ drops what it had queued for a trainer that
died: a step a client sent may never have reached the checkpoint the trainer resumes
from. The window keeps, per time step, a copy of the arrays `send` was given (its
fields, each the caller's array or its part). The copies go into one preallocated ring
per field, of ``max_bytes // (bytes of one step)`` rows, allocated at the first step:
one array assignment per field and send, no allocation (a dict of copies per step cost
half the throughput of a 1 KB field: `benchmarks/follow_window.py`). The oldest step is
overwritten when the ring is full. Memory: at most `max_bytes` of rings, plus about 100
bytes per step kept (its index). A step larger than `max_bytes` is not kept at all.
Not thread-safe (the client's thread).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["ReplayWindow"]


class ReplayWindow:
    """The last steps sent, as copies, at most `max_bytes` of array data (module doc).

    Args:
        max_bytes: the bound (> 0): the oldest steps are overwritten past it.
    """

    __slots__ = ("max_bytes", "_rings", "_odd", "_slot_of", "_step_at", "_next", "dropped")

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"a replay window needs max_bytes > 0, not {max_bytes}")
        self.max_bytes = max_bytes
        #: name -> (rows, *shape of the first step's array)
        self._rings: dict[str, np.ndarray] | None = None
        #: (name, row) -> the shape of a row given in another shape (a part of an MPI
        #: rank, whose shape may change while its size does not)
        self._odd: dict[tuple[str, int], tuple[int, ...]] = {}
        self._slot_of: dict[int, int] = {}  # step -> row
        self._step_at: list[int | None] = []  # row -> step
        self._next = 0
        #: how many steps were overwritten (or never kept) to stay within `max_bytes`
        self.dropped = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the rings (allocated at the first step)."""
        return 0 if self._rings is None else sum(r.nbytes for r in self._rings.values())

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, step: int) -> bool:
        return step in self._slot_of

    def __getitem__(self, step: int) -> dict[str, np.ndarray]:
        """The copies of `step`'s fields, in the shapes they were given (views of the
        rings: valid until the next `record`)."""
        slot = self._slot_of[step]
        assert self._rings is not None
        out = {}
        for name, ring in self._rings.items():
            shape = self._odd.get((name, slot))
            out[name] = ring[slot] if shape is None else ring[slot].reshape(shape)
        return out

    def record(self, step: int, arrays: Mapping[str, Any]) -> None:
        """Keep a copy of `arrays` (the fields `send` was given for `step`, already
        checked by it: the same fields, each of the same size, every step), replacing
        any older copy of that step and overwriting the oldest step when full."""
        rings = self._rings
        if rings is None:
            rings = self._allocate(arrays)
            if rings is None:
                self.dropped += 1
                return
        slot_of = self._slot_of
        slot = slot_of.pop(step, None)
        if slot is None:
            slot = self._next
            self._next = slot + 1 if slot + 1 < len(self._step_at) else 0
            old = self._step_at[slot]
            if old is not None:
                del slot_of[old]
                self.dropped += 1
        slot_of[step] = slot
        self._step_at[slot] = step
        odd = self._odd
        for name, value in arrays.items():
            ring = rings[name]
            if odd:
                odd.pop((name, slot), None)
            if type(value) is np.ndarray and value.shape == ring.shape[1:]:
                ring[slot] = value  # (the usual case: one assignment)
                continue
            value = np.asarray(value)
            if value.shape != ring.shape[1:]:
                odd[(name, slot)] = value.shape
            ring[slot] = value.reshape(ring.shape[1:])

    def _allocate(self, arrays: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """The rings, sized from the first step's arrays (None: one step is too big)."""
        values = {name: np.asarray(value) for name, value in arrays.items()}
        step_bytes = sum(v.nbytes for v in values.values())
        rows = self.max_bytes // max(step_bytes, 1)
        if rows < 1:
            return None
        self._rings = {
            name: np.empty((rows, *v.shape), v.dtype.newbyteorder("="))
            for name, v in values.items()
        }
        self._step_at = [None] * rows
        return self._rings
