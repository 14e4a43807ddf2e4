"""The exploration draws of `BreedSampler`: points of a scrambled low-discrepancy
sequence, optionally **gap-filling** (each draw the candidate farthest from every point
drawn so far).

Kept apart from `adaptive.py`: it is the only part of Breed with a memory of its own
draws, and its state (the sequence's position, the points remembered) is a block of
the sampler's `state_dict` (a Breed state saved before gap-filling existed is upgraded
by `checkpoint_migrations`, "breed_sampler").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import qmc

from melissa_trainer.launcher.sampler_base import qmc_engine
from melissa_trainer.validation import check_positive_int

__all__ = ["ENGINES", "Exploration"]

#: the low-discrepancy sequences an exploration can follow (scrambled, seeded like
#: `SobolSampler` / `HaltonSampler` with the same seed: the same points)
ENGINES: dict[str, Any] = {"sobol": qmc.Sobol, "halton": qmc.Halton}


class Exploration:
    """The exploration draws of one sampler, as points of the unit cube of `dims`
    dimensions (the sampler scales them to its box).

    - ``candidates=1``: each draw is the next point of the sequence (the sequence
      itself: consecutive points, low discrepancy), and nothing is remembered.
    - ``candidates=K > 1`` (**gap-filling**): each draw takes the next K points of the
      sequence and returns the one whose nearest remembered point is the farthest
      (maximin, Euclidean distance in the unit cube over the `varying` dimensions; the
      first of equals; the first candidate while nothing is remembered). The other
      K - 1 are discarded, so the sequence advances by K per draw. Every draw of the
      sampler, bred or explored, must be passed to `remember`: the explorations then go
      to the holes that the bred draws (clustered around their parents) leave.

    The memory keeps the newest `memory` points (None: all of them, the state then
    grows with the study): they are in the state, so a resumed sampler picks the same
    candidates. Its cost is K x `memory` distances per exploration draw and
    `memory` x `varying` floats in the state.

    Deterministic given the seed and the points remembered; not thread-safe (the
    sampler's lock).
    """

    def __init__(
        self,
        engine: str,
        dims: int,
        seed: int,
        varying: np.ndarray,
        candidates: int = 1,
        memory: int | None = 1000,
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"explorer must be 'sobol' or 'halton', not {engine!r}")
        check_positive_int("candidates", candidates)
        if memory is not None:
            check_positive_int("memory", memory)
        self.engine, self.dims, self.seed = engine, dims, seed
        self.candidates, self.memory = candidates, memory
        self._varying = np.asarray(varying, dtype=bool)
        #: exploration draws made so far
        self.explored = 0
        #: points of the sequence consumed so far (`candidates` per draw)
        self.position = 0
        self._forget()
        self._sequence = self._new_sequence()

    def _forget(self) -> None:
        # a ring of the remembered points (the varying dimensions): row `_count % size`
        # is the next to be written, so the newest `memory` stay without copying
        self._ring = np.empty((min(self.memory or 64, 64), int(self._varying.sum())))
        self._count = 0

    @property
    def drawn(self) -> np.ndarray:
        """The remembered points (oldest first), over the varying dimensions only."""
        held = self._held()
        if self._count <= len(self._ring):
            return held.copy()
        return np.roll(held, -(self._count % len(self._ring)), axis=0)

    def _held(self) -> np.ndarray:
        """The remembered points, in ring order (a view)."""
        return self._ring[: min(self._count, len(self._ring))]

    def _new_sequence(self) -> Any:
        return qmc_engine(ENGINES[self.engine], self.dims, self.seed, scramble=True)

    def _next(self, n: int) -> np.ndarray:
        with warnings.catch_warnings():
            # Sobol' warns when the points drawn are not a power of two (see SobolSampler)
            warnings.filterwarnings("ignore", message=".*balance properties.*")
            points: np.ndarray = self._sequence.random(n)
        self.position += n
        return points

    def draw(self) -> np.ndarray:
        """The next exploration point of the unit cube (all `dims` dimensions)."""
        candidates = self._next(self.candidates)
        self.explored += 1
        if self.candidates == 1 or not self._count:
            return candidates[0]
        return candidates[int(np.argmax(self.gaps(candidates)))]

    def gaps(self, points: np.ndarray) -> np.ndarray:
        """Each point's distance to its nearest remembered point (inf: none remembered)."""
        drawn = self._held()  # the order does not matter for the nearest one
        if not len(drawn):
            return np.full(len(points), math.inf)
        diff = points[:, None, self._varying] - drawn[None, :, :]
        return np.sqrt(np.min(np.sum(diff * diff, axis=2), axis=1))

    def remember(self, unit: np.ndarray) -> None:
        """Record a draw of the sampler (a point of the unit cube), bred or explored.
        A no-op with ``candidates=1``, which picks nothing."""
        if self.candidates > 1:
            self._append(np.clip(np.asarray(unit, dtype=np.float64)[self._varying], 0.0, 1.0))

    def _append(self, point: np.ndarray) -> None:
        size = len(self._ring)
        if self._count >= size and (self.memory is None or size < self.memory):
            # full but allowed more: grow (doubling, at most `memory`), oldest first
            grown = 2 * size if self.memory is None else min(2 * size, self.memory)
            self._ring = np.concatenate([self.drawn, np.empty((grown - size, point.size))])
            self._count, size = size, grown
        self._ring[self._count % size] = point
        self._count += 1

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable (floats round-trip exactly through `json`)."""
        return {
            "engine": self.engine,
            "explored": self.explored,
            "position": self.position,
            "drawn": self.drawn.tolist(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a `state_dict()` of an exploration built with the same arguments.

        Raises:
            ValueError: another engine, a malformed count or remembered point; nothing
                changes then.
        """
        if state.get("engine") != self.engine:
            raise ValueError(
                f"exploration state has engine={state.get('engine')!r}, this sampler "
                f"explorer={self.engine!r}"
            )
        explored, position = state.get("explored"), state.get("position")
        for name, value in (("explored", explored), ("position", position)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"exploration state has an invalid {name} {value!r}")
        assert isinstance(explored, int) and isinstance(position, int)  # for mypy
        if position != explored * self.candidates:
            raise ValueError(
                f"exploration state has position {position} for {explored} draws of "
                f"{self.candidates} candidates: saved with other candidates"
            )
        drawn = self._checked_points(state.get("drawn"))
        self.explored, self.position = explored, position
        self._forget()
        for point in drawn:
            self._append(point)
        self._sequence = self._new_sequence()
        if position:
            self._sequence.fast_forward(position)

    def _checked_points(self, saved: Any) -> list[np.ndarray]:
        if not isinstance(saved, list):
            raise ValueError(f"exploration state has no list of drawn points: {saved!r}")
        if self.memory is not None and len(saved) > self.memory:
            raise ValueError(f"exploration state has {len(saved)} points, over memory")
        if saved and self.candidates == 1:
            raise ValueError("exploration state has drawn points, but candidates=1 keeps none")
        width, points = int(self._varying.sum()), []
        for item in saved:
            numbers = isinstance(item, list) and all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in item
            )
            point = np.array(item if numbers else [], dtype=np.float64)
            if point.shape != (width,) or not np.all((point >= 0.0) & (point <= 1.0)):
                raise ValueError(f"exploration state has a malformed point {item!r}")
            points.append(point)
        return points
