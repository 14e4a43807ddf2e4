"""The exploration draws of `BreedSampler`: points of a scrambled low-discrepancy
sequence or of an optimised Latin hypercube of the planned budget, optionally
**gap-filling** (each draw the candidate farthest from every point drawn so far).

Kept apart from `breed.py`: it is the only part of Breed with a memory of its own
draws, and its state (the sequence's position, the points remembered) is a block of
the sampler's `state_dict` (a Breed state saved before gap-filling existed is upgraded
by `common.migrations`, "breed_sampler"; the checks a state passes are
`launcher.exploration_state`'s). Where a replacement draw goes (a point whose
nearest draw was not given up: `Exploration.away_from`) is
`launcher.replacement_points`'s (`away_from`, `REPLACEMENT_CANDIDATES`). Which explorer
runs, and its candidates: `launcher.explorers`.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.common.checks import check_positive_int
from melissa_trainer.launcher.exploration_state import (
    LHS_MAX_BLOCK,
    checked_design,
    checked_held_design,
    checked_points,
)
from melissa_trainer.launcher.explorers import ENGINES, EXPLORERS
from melissa_trainer.launcher.replacement_points import away_from
from melissa_trainer.launcher.sampler_base import qmc_engine

__all__ = ["LHS_BLOCK", "Exploration", "nearest_gaps"]

#: "lhs": a design's size when no budget was planned (`Exploration.plan`)
LHS_BLOCK = 64


def nearest_gaps(points: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Each row of `points`' distance to its nearest row of `drawn` (rows over the same
    dimensions; inf: none drawn): the gap-filling criterion."""
    if not len(drawn):
        return np.full(len(points), math.inf)
    diff = points[:, None, :] - drawn[None, :, :]
    out: np.ndarray = np.sqrt(np.min(np.sum(diff * diff, axis=2), axis=1))
    return out


@functools.lru_cache(maxsize=16)
def _lhs_design(width: int, seed: int, block: int, size: int) -> np.ndarray:
    """The optimised Latin hypercube of `size` points in `width` dimensions seeded with
    ``[seed, 31, block]`` (read-only; callers copy it). A pure function of its
    arguments, memoised because scipy's "random-cd" optimisation loops in Python
    (about 0.1-0.3 s for 40-60 points in 6 dimensions): every sampler built again with
    the same seed (a resume, `design_drawn` after one, a study run twice in one
    process) paid it again. 16 designs of at most `LHS_MAX_BLOCK` points are kept."""
    lhs = qmc_engine("LatinHypercube", width, [seed, 31, block], optimization="random-cd")
    design: np.ndarray = lhs.random(size)
    design.setflags(write=False)
    return design


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

    ``engine="lhs"``: the points come from a Latin hypercube over the `varying`
    dimensions (the fixed ones 0), optimised for its centred discrepancy, of `size`
    points: the budget passed to `plan` before the first draw (at most `LHS_MAX_BLOCK`;
    `LHS_BLOCK` unplanned), seeded with ``[seed, 31, block]``. Each draw takes one of
    its unused points: the first unused one (``candidates=1``: the design in order), or
    of the first `candidates` unused ones the farthest from the remembered points. When
    a design's points are all used, the next block's design follows. Exploring alone
    (every draw of a budget of `size`), the draws are the whole design: one point in
    each of the `size` strata of every varying dimension.

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
        if engine not in EXPLORERS:
            raise ValueError(f"explorer must be one of {EXPLORERS}, not {engine!r}")
        check_positive_int("candidates", candidates)
        if memory is not None:
            check_positive_int("memory", memory)
        self.engine, self.dims, self.seed = engine, dims, seed
        self.candidates, self.memory = candidates, memory
        self._varying = np.asarray(varying, dtype=bool)
        #: exploration draws made so far
        self.explored = 0
        #: points of the sequence consumed so far (`candidates` per draw; "lhs": 1)
        self.position = 0
        #: "lhs": the size of each design (None until planned or first drawn)
        self.size: int | None = None
        self._used: list[int] = []  # "lhs": the current design's points used, in order
        self._design: np.ndarray | None = None  # "lhs": the current design (varying dims)
        self._design_block = -1  # "lhs": the block `_design` is
        self._forget()
        self._sequence = None if engine == "lhs" else self._new_sequence()

    def plan(self, n_draws: int) -> None:
        """For "lhs": the designs' size becomes `n_draws` (at most `LHS_MAX_BLOCK`),
        before the first draw; afterwards, and for the sequences, a no-op. A design
        `prepare`d before, of another size, is dropped (computed again when needed):
        kept, the draws took the old design's points in blocks of the new size, and its
        state did not load (its design's points disagreed with its ``size``)."""
        if self.engine == "lhs" and self.explored == 0 and n_draws >= 1:
            size = min(int(n_draws), LHS_MAX_BLOCK)
            if size != self.size:
                self._design, self._design_block = None, -1
            self.size = size

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
        assert self._sequence is not None  # a sequence's, never "lhs"
        with warnings.catch_warnings():
            # Sobol' warns when the points drawn are not a power of two (see SobolSampler)
            warnings.filterwarnings("ignore", message=".*balance properties.*")
            points: np.ndarray = self._sequence.random(n)
        self.position += n
        return points

    def draw(self) -> np.ndarray:
        """The next exploration point of the unit cube (all `dims` dimensions)."""
        if self.engine == "lhs":
            return self._draw_design()
        candidates = self._next(self.candidates)
        self.explored += 1
        if self.candidates == 1 or not self._count:
            return candidates[0]
        return candidates[int(np.argmax(self.gaps(candidates)))]

    def prepare(self) -> None:
        """For "lhs": compute the design the next draw takes its point from now (its
        optimisation costs O(size^2) per pass: seconds for a few hundred points), so
        that the draw does not; a no-op for the sequences."""
        if self.engine == "lhs":
            size = self.size = self.size or LHS_BLOCK
            block = self.explored // size
            if self._design is None or self._design_block != block:
                self._design, self._design_block = self._block(block), block

    def _draw_design(self) -> np.ndarray:
        size = self.size = self.size or LHS_BLOCK
        block, taken = divmod(self.explored, size)
        self.prepare()  # a resumed one, or the next block
        assert self._design is not None  # for mypy: prepared
        if taken == 0:
            self._used = []
        used = set(self._used)
        unused = [i for i in range(size) if i not in used][: self.candidates]
        pick = 0
        if len(unused) > 1 and self._count:
            pick = int(np.argmax(self._gaps_varying(self._design[unused])))
        self._used.append(unused[pick])
        self.explored += 1
        self.position += 1
        point = np.zeros(self.dims)
        point[self._varying] = self._design[unused[pick]]
        return point

    def _block(self, block: int) -> np.ndarray:
        """Design number `block` ("lhs"): `size` points over the varying dimensions."""
        assert self.size is not None  # set by the first draw or a loaded state
        width = int(self._varying.sum())
        if width == 0:  # nothing varies: every point is the same
            return np.zeros((self.size, 0))
        # a copy: the memo's array is shared by every sampler of this process
        return _lhs_design(width, int(self.seed), block, self.size).copy()

    def design_drawn(self) -> np.ndarray:
        """With "lhs", the current design's points drawn so far (rows over the varying
        dimensions; it is computed again only if not held: after a resume, the one the
        draws came from, never the next); none with a sequence."""
        if self.engine != "lhs" or not self.explored or self.size is None:
            return np.zeros((0, int(self._varying.sum())))
        block = (self.explored - 1) // self.size
        if self._design is None or self._design_block != block:
            self._design, self._design_block = self._block(block), block
        return self._design[self._used]

    def away_from(self, index: int, drawn: np.ndarray, failed: np.ndarray) -> np.ndarray:
        """A point of the unit cube (all `dims` dimensions, the fixed ones 0), uniform
        over the varying ones, whose nearest row of `drawn` (rows over the varying
        dimensions: the points drawn so far) is not one of `failed` (rows as `drawn`'s,
        among them: the points of simulations given up): the first such of
        `REPLACEMENT_CANDIDATES` uniform points seeded with ``[seed, 47, index]`` (the
        first of them if none is such). A solver that fails for some parameters usually
        fails in a region: where the nearest draw failed, a new one is likelier to fail
        too. Nothing of the design's state changes; no design is computed (a design
        past the planned one costs seconds, `prepare`; this, well under a millisecond):
        a sampler's replacement draws call it on the launcher's thread."""
        point = np.zeros(self.dims)
        point[self._varying] = away_from(self.seed, index, point[self._varying].size, drawn, failed)
        return point

    def gaps(self, points: np.ndarray) -> np.ndarray:
        """Each point's distance to its nearest remembered point (inf: none remembered)."""
        return self._gaps_varying(points[:, self._varying])

    def _gaps_varying(self, points: np.ndarray) -> np.ndarray:
        return nearest_gaps(points, self._held())  # (the order does not matter)

    def remember(self, unit: np.ndarray) -> None:
        """Record a draw of the sampler (a point of the unit cube), bred or explored.
        A no-op with ``candidates=1``, which picks nothing."""
        if self.candidates > 1:
            self._append(np.clip(np.asarray(unit, dtype=np.float64)[self._varying], 0.0, 1.0))

    def remember_only(self, points: np.ndarray) -> None:
        """Replace the remembered points with `points` (rows over the varying
        dimensions, clipped into the unit cube; the newest `memory` kept): for a sampler
        whose metric moves, as `DensitySampler`'s warp does."""
        self._forget()
        # (len, not -1: with every parameter fixed the rows are empty, size 0)
        rows = np.asarray(points, dtype=np.float64).reshape(len(points), int(self._varying.sum()))
        for point in rows:
            self._append(np.clip(point, 0.0, 1.0))

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
        """JSON-serializable (floats round-trip exactly through `json`). "lhs" adds the
        designs' ``size``, the current design's points ``used`` and, once computed, the
        design held (``design``: its block and points): a resume then takes the design
        from the state instead of optimising it again (seconds for a few hundred points:
        `benchmarks/breed_first_draw.py`), and a state without it (saved before its
        design was computed, or by an older version) computes it from the seed when a
        draw needs it, the same points."""
        state: dict[str, Any] = {
            "engine": self.engine,
            "explored": self.explored,
            "position": self.position,
            "drawn": self.drawn.tolist(),
        }
        if self.engine == "lhs":
            state.update(size=self.size, used=list(self._used))
            if self._design is not None:
                # the design held, so that a resume need not optimise it again (seconds
                # for a few hundred points); the same bits (json round-trips floats)
                state["design"] = {"block": self._design_block, "points": self._design.tolist()}
        return state

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
        per_draw = 1 if self.engine == "lhs" else self.candidates
        if position != explored * per_draw:
            raise ValueError(
                f"exploration state has position {position} for {explored} draws of "
                f"{self.candidates} candidates: saved with other candidates"
            )
        width = int(self._varying.sum())
        drawn = checked_points(state.get("drawn"), width, self.candidates, self.memory)
        size, used = checked_design(state, explored) if self.engine == "lhs" else (None, [])
        block, design = checked_held_design(state.get("design"), self.engine, size, width)
        self.explored, self.position = explored, position
        self._forget()
        for point in drawn:
            self._append(point)
        self.size, self._used = size, used
        self._design, self._design_block = design, block
        if self.engine != "lhs":
            self._sequence = self._new_sequence()
            if position:
                self._sequence.fast_forward(position)
