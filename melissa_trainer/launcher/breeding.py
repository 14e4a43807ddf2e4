"""How `BreedSampler` breeds a draw: the parents' weights from their losses, a child
moved from its parent by Gaussian noise and reflected at the bounds of the unit cube,
and, with simulations given up, children tried again out of their no-go zones.

Functions of the unit cube (the sampler's class docstring says what they mean in a
parameter's own units); the sampler's generator draws every random number, in the order
its draws' reproducibility rests on (`launcher.breed`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from melissa_trainer.launcher.failed_zones import FailedZones

__all__ = ["BRED_TRIES", "bred_child", "parent_weights", "reflected"]

#: the children `bred_child` tries more when the first is in a no-go zone
BRED_TRIES = 16


def parent_weights(losses: np.ndarray, floor: float, power: float) -> np.ndarray:
    """Each observation's probability of being the next parent, in the order of its
    `losses` (not empty): with ``z = (L - min L) / (max L - min L)`` (0 when they are
    all equal), ``(z + floor) ** power``, normalised (`BreedSampler`'s docstring)."""
    spread = float(losses.max() - losses.min()) if losses.size else 0.0
    z = (losses - losses.min()) / spread if spread > 0 else np.zeros_like(losses)
    # divided by the largest before the power, which could overflow otherwise
    weights = ((z + floor) / (1.0 + floor)) ** power
    out: np.ndarray = weights / weights.sum()
    return out


def bred_child(
    parent: np.ndarray,
    rng: np.random.Generator,
    sigma: float,
    zones: FailedZones,
    known: Callable[[], np.ndarray],
    varying: np.ndarray,
) -> np.ndarray:
    """A child of `parent` (its unit point), moved by ``N(0, sigma)`` in each coordinate
    and reflected at the bounds (`reflected`). With simulations given up (`zones` not
    empty): a child in a no-go zone is replaced by the first of `BRED_TRIES` more
    children of the same parent outside every zone, or, when all of them are in one, by
    the one farthest from every failure (`FailedZones.choose`, given the `known` points,
    over the `varying` coordinates, asked only then). The same generator draws them
    after the first child: without failures, or with a first child outside the zones,
    the draws are the same as without zones."""
    dims = len(parent)
    unit = reflected(parent + rng.normal(0.0, sigma, dims))
    if not len(zones):
        return unit
    known_points = known()
    if zones.allowed(unit[None, varying], known_points)[0]:
        return unit
    children = reflected(parent + rng.normal(0.0, sigma, (BRED_TRIES, dims)))
    order = -np.arange(BRED_TRIES, dtype=np.float64)  # the first allowed one
    out: np.ndarray = children[zones.choose(children[:, varying], order, known_points)]
    return out


def reflected(unit: np.ndarray) -> np.ndarray:
    """`unit` reflected into [0, 1] at the bounds (also twice or more)."""
    out: np.ndarray = np.abs((unit + 1.0) % 2.0 - 1.0)
    return out
