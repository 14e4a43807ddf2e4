"""Where a replacement draw goes: a point whose nearest draw was not given up
(`away_from`). A solver that fails for some parameters usually fails in a region: where
the nearest draw failed, a new one is likelier to fail too.

Shared by the samplers that replace the simulations given up (`Sampler.failed`) once
their planned design is drawn: `DensitySampler` and `BreedSampler` through
`Exploration.away_from` (`launcher.density_replace` says which draws are replacements),
`LatinHypercubeSampler` directly. Deterministic: draw `index`'s candidates are seeded
with ``[seed, 47, index]``; no design is computed (well under a millisecond: a
sampler's replacement draws run on the launcher's thread, under its lock). numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["REPLACEMENT_CANDIDATES", "away_from"]

#: `away_from`'s candidates (a replacement draw's: the first whose nearest draw did not
#: fail; 256 leave one only where nearly every region holds a failure)
REPLACEMENT_CANDIDATES = 256


def away_from(
    seed: int, index: int, width: int, drawn: np.ndarray, failed: np.ndarray
) -> np.ndarray:
    """`Exploration.away_from`'s point over `width` varying dimensions alone (the rows
    of `drawn` and `failed` as wide); `LatinHypercubeSampler`'s replacements too."""
    if width == 0:
        return np.zeros(0)
    candidates = np.random.default_rng([seed, 47, index]).random((REPLACEMENT_CANDIDATES, width))
    pick = 0
    if len(drawn) and len(failed):
        # (a failed row is also a row of `drawn`, up to rounding: equal distances,
        # within it, make the nearest draw a failed one)
        nearest = _nearest(candidates, drawn)
        clear = np.flatnonzero(_nearest(candidates, failed) > nearest * (1 + 1e-9) + 1e-15)
        pick = int(clear[0]) if len(clear) else 0
    out: np.ndarray = candidates[pick]
    return out


def _nearest(points: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each of `points`' squared distance to its nearest row of `rows`."""
    diff = points[:, None, :] - np.asarray(rows, dtype=np.float64)[None, :, :]
    out: np.ndarray = np.min(np.sum(diff * diff, axis=2), axis=1)
    return out
