"""The checkpoint of a :class:`~melissa_trainer.buffers.ReservoirBuffer` (`ReservoirState`,
a base of it): its slots, their draw counts and insert ids, the never-drawn / drawn /
free index lists, and the draw and eviction policy, which a snapshot loads only into a
buffer with the same (``max_sample_reuse``, ``draw_choices``, ``evict_choices``); a
loaded state is checked whole before it replaces the buffer's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _state
from ._common import Sample
from ._core import BufferCore

__all__ = ["ReservoirState"]


class ReservoirState(BufferCore):
    """The checkpoint half of `ReservoirBuffer` (module docstring), whose ``__init__``
    sets the attributes; under the buffer's lock, as every snapshot is."""

    _max_reuse: int | None
    _draw_choices: int
    _evict_choices: int
    _slots: list[Sample | None]
    _draws: list[int]
    _ins: list[int]
    _pos: list[int]
    _undrawn: list[int]
    _drawn: list[int]
    _free: list[int]

    def _policy_meta(self) -> dict[str, int]:
        """The draw and eviction policy, as a snapshot records it (a resume with
        another would not draw as the saved run did)."""
        return {"draw_choices": self._draw_choices, "evict_choices": self._evict_choices}

    def _contents_state(self, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        for slot in self._undrawn + self._drawn:
            sample = self._slots[slot]
            assert sample is not None
            _state.encode_sample(arrays, f"s{slot}", sample)
        return {
            "max_sample_reuse": self._max_reuse,
            **self._policy_meta(),
            "n_slots": len(self._slots),
            "draws": list(self._draws),
            "insert_ids": list(self._ins),
            "undrawn": list(self._undrawn),
            "drawn": list(self._drawn),
            "free": list(self._free),
        }

    def _load_contents(self, samples: dict[str, Sample], meta: dict[str, Any]) -> None:
        if meta.get("max_sample_reuse") != self._max_reuse:
            raise ValueError(
                f"buffer state has max_sample_reuse={meta.get('max_sample_reuse')!r}, "
                f"this buffer {self._max_reuse!r}"
            )
        for key, value in self._policy_meta().items():
            # (a snapshot from before these options drew and evicted uniformly: 1)
            if meta.get(key, 1) != value:
                raise ValueError(
                    f"buffer state has {key}={meta.get(key, 1)!r}, this buffer {value!r}: "
                    f"resume with {key}={meta.get(key, 1)!r} (the same draws as the run saved)"
                )
        n_slots = meta.get("n_slots")
        if not isinstance(n_slots, int) or not 0 <= n_slots <= self._capacity:
            raise ValueError(f"malformed buffer state: n_slots={n_slots!r}")
        draws = _state.int_list("draws", meta.get("draws"), length=n_slots)
        ins = _state.int_list("insert_ids", meta.get("insert_ids"), length=n_slots)
        undrawn = _state.int_list("undrawn", meta.get("undrawn"), upper=n_slots)
        drawn = _state.int_list("drawn", meta.get("drawn"), upper=n_slots)
        free = _state.int_list("free", meta.get("free"), upper=n_slots)
        if sorted(undrawn + drawn + free) != list(range(n_slots)):
            raise ValueError(
                "malformed buffer state: undrawn/drawn/free do not partition the slots"
            )
        if any(draws[s] != 0 for s in undrawn) or any(draws[s] < 1 for s in drawn):
            raise ValueError("malformed buffer state: draw counts disagree with the index lists")
        if self._max_reuse is not None and any(draws[s] >= self._max_reuse for s in drawn):
            raise ValueError("malformed buffer state: a held sample reached max_sample_reuse")
        unknown = set(samples) - {f"s{s}" for s in undrawn + drawn}
        if unknown:
            raise ValueError(f"malformed buffer state: unexpected samples {sorted(unknown)[:5]}")
        slots: list[Sample | None] = [None] * n_slots
        pos = [0] * n_slots
        for lst in (undrawn, drawn):
            for j, s in enumerate(lst):
                slots[s] = samples.get(f"s{s}", {})
                pos[s] = j
        self._slots, self._draws, self._ins, self._pos = slots, draws, ins, pos
        self._undrawn, self._drawn, self._free = undrawn, drawn, free
