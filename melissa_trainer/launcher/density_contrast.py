"""The `contrast` of `DensitySampler` (issue 46, fourth round): a draw that the loss warp
puts inside the high-loss region takes the parameters the warp leaves alone through
Beta(e, e), ``e`` from the sampler's `edge` outside the region to `contrast` at its peak
(`melissa_trainer.launcher.density`'s docstring says why).

Pure functions of their arguments (the sampler's state passed in); `sharpen` changes the
draw it is given in place. Not thread-safe beyond that (the launcher's lock).
"""

from __future__ import annotations

import numpy as np

from melissa_trainer.launcher.density_warp import UNIT_GRID
from melissa_trainer.launcher.sampler_base import bounded_number

__all__ = ["CONTRAST", "CONTRAST_FROM", "contrast_for", "hardness", "sharpen"]

#: `contrast` "auto": this value from `CONTRAST_FROM` varying parameters on (chosen on the
#: 12-parameter study's tuning seeds, docs/measured.md, issue 46's fourth round); below,
#: none (at 6 parameters, tuning seeds, it cost the mean and did not move the max)
CONTRAST, CONTRAST_FROM = 0.25, 7


def contrast_for(option: float | str | None, varying: int, edge: float = 0.7) -> float | None:
    """The `contrast` a `DensitySampler` with `varying` varying parameters and this
    `edge` uses for `option` ("auto", None or a number in (0, 10], at most `edge`).

    `contrast` is where Beta(e, e)'s ``e`` goes, from `edge`, as a draw goes deeper into
    the high-loss region: below `edge` the other parameters go nearer their bounds
    (what it is for); above `edge` they would go towards the middle of their ranges,
    the opposite, so a number above `edge` is refused (equal: no effect). "auto" is
    `CONTRAST` from `CONTRAST_FROM` varying parameters on, but None where `edge` is
    already at or below it (the design's marginal is then as near the bounds as the
    contrast would put the draws, or nearer).

    Raises:
        ValueError: another string, a number out of range, or above `edge` (the message
            names both fields and the fix).
    """
    if option == "auto":
        return CONTRAST if varying >= CONTRAST_FROM and edge > CONTRAST else None
    if option is None:
        return None
    if isinstance(option, str):
        raise ValueError(f"contrast={option!r}: use 'auto', None or a number in (0, 10]")
    contrast = bounded_number("contrast", option, 0.0, 10.0, low_open=True)
    if contrast > edge:
        raise ValueError(
            f"contrast={option!r} is above edge={edge!r}: where the loss is high, the "
            f"parameters the loss warp leaves alone follow Beta(e, e) with e going from "
            f"edge down to contrast, nearer their bounds; a contrast above edge would push "
            f"them towards the middle of their ranges instead. Use contrast <= edge (e.g. "
            f"contrast={min(CONTRAST, edge)!r}), raise edge, or contrast=None to turn it off"
        )
    return contrast


def hardness(unit: np.ndarray, columns: np.ndarray, hard: list[np.ndarray | None]) -> float:
    """How deep `unit` (a point of the unit cube over every parameter) lies in the
    high-loss region of a warp: over the warped parameters (`columns`, those whose pure
    high-loss density on `UNIT_GRID` in `hard` is not None), the least of that density
    at its coordinate over the density's peak, in [0, 1] (0 where none is warped)."""
    levels = []
    for c, d in zip(columns, hard, strict=True):
        if d is not None and (peak := d.max()) > 0:
            levels.append(float(np.interp(unit[c], UNIT_GRID, d) / peak))
    return min(levels) if levels else 0.0


def sharpen(
    unit: np.ndarray,
    latent: np.ndarray,
    columns: np.ndarray,
    hard: list[np.ndarray | None],
    edge: float,
    contrast: float,
) -> None:
    """The parameters the loss warp leaves alone (`hard` None), of a draw `unit` inside
    the high-loss region (`hardness` h), set in place from their design coordinates
    `latent` through Beta(e, e) with ``e = edge^(1 - h) x contrast^h`` instead of
    Beta(edge, edge): where the loss is high, the draws go nearer the bounds of the
    other parameters (the largest contrasts between them, where a surrogate
    extrapolates), elsewhere the design's marginal is kept."""
    # Beta(e, e)'s inverse distribution function, scipy's `betaincinv`: the same
    # values as `scipy.stats.beta.ppf` (both Boost's ibeta_inv; a test compares them)
    # without its argument checks, which cost about 0.2 ms a draw (issue 46)
    from scipy.special import betaincinv  # scipy: already the samplers' (qmc)

    h = hardness(unit, columns, hard)
    if h <= 0.0:
        return
    e = edge ** (1.0 - h) * contrast**h
    free = np.array([d is None for d in hard])
    unit[columns[free]] = betaincinv(e, e, latent[free])
