"""The checks of the adaptive samplers' options that are in range yet meaningless:
values each option's own range accepts but with which the loss would steer nothing,
while the sampler still counts its draws as adapted (`AdaptiveSampler.adaptive_draws`,
the study's account). Each is refused when the sampler is built, before any study
starts, with a ValueError naming the option, what the value would do and the fix (the
wording of `sampler_base.decay_draws_for`).

What each rule rests on, read in the code that uses the option:

- a `SurrogateSampler`'s `min_observations` below `SURROGATE_LEAST` (3): its loss
  predictor removes the losses' linear trend in launch order (two coefficients) before
  it fits them, so one or two losses leave nothing: a predicted loss flat at 0, every
  "acquisition" a pick by the predicted deviation alone (`loss_predictor.LossPredictor`);
- a `DensitySampler`'s `min_observations` below `DENSITY_LEAST` (3): the evidence of a
  trend needs 3 losses (`density_warp.trend_evidence` is 0 below), and the high-loss
  density is of at least the top two (`density_warp.top_count`), every observation of
  one or two;
- its `quantile` so high that the top is every observation the `window` keeps: the
  density of where the draws went, whatever their losses (1: "keep all" is that: the
  design's draws drawn again, which ``share=0`` says plainly);
- its `evidence` above ``sqrt(window - 1)``: a rank correlation is at most 1, so no
  parameter could ever reach it and none would be warped;
- its `tilt` 0: ``exp(0 x`` the loss profile ``)`` is flat, the uniform whatever the
  losses;
- a `BreedSampler`'s `sigma` above `SIGMA_MOST` (1): a move wider than the whole range, reflected at
  the bounds, is uniform whatever its parent (`uniform_within`: within 1.5% at 1);
- a `SurrogateSampler`'s `pool` of 1: the best of one uniform candidate is a uniform
  draw.

Values at the edge that do mean something are kept: ``exploration`` 0 or 1 (adapt
only, explore only), ``share`` 0 (the design unwarped), ``kappa`` 0 (the predicted
loss alone), a tiny `quantile` (the density of the top two), ``min_observations``
equal to `window`, and Breed's ``min_observations`` 1: its first bred draws are then
moved from the one simulation kept, whatever its loss (`BreedSampler.parent_weights`
weighs it 1, as it weighs equal losses alike), and the losses steer from the second
on; the Gaussian move around a simulation seen is what Breed breeds, and a study (or
a test) that wants it from the first loss on may ask for it. Pure functions;
thread-safe.
"""

from __future__ import annotations

import math
from typing import Any

from melissa_trainer.common.checks import check_positive_int

__all__ = [
    "DENSITY_LEAST",
    "SIGMA_MOST",
    "SURROGATE_LEAST",
    "checked_evidence",
    "checked_min_observations",
    "checked_pool",
    "checked_quantile",
    "checked_sigma",
    "checked_tilt",
    "top_count",
    "uniform_within",
]

#: the fewest observations a `SurrogateSampler` can fit a non-flat predictor to
SURROGATE_LEAST = 3
#: the fewest observations a `DensitySampler`'s warp can tell apart by their losses
DENSITY_LEAST = 3
#: the widest `sigma` a bred child still depends on its parent with
SIGMA_MOST = 1.0

_WHY_LEAST = {
    "surrogate": (
        "its loss predictor removes the losses' trend in launch order (2 coefficients) "
        "first, so with fewer than 3 losses the predicted loss is flat and every acquisition "
        "draw would be steered by no loss"
    ),
    "density": (
        "the evidence of a trend needs 3 losses and the high-loss density is of the top "
        "two at least, so with fewer every warp would be of where the draws went, "
        "whatever their losses"
    ),
}
_LEAST = {"surrogate": SURROGATE_LEAST, "density": DENSITY_LEAST, "breed": 1}


def checked_min_observations(kind: str, value: Any, window: int | None) -> int:
    """`value`, the `min_observations` of the adaptive sampler `kind` ("surrogate",
    "density" or "breed"), if it is an int from `_LEAST[kind]` to `window` (None: no
    upper bound).

    Raises:
        ValueError: naming min_observations, why, and the fix.
    """
    least = _LEAST[kind]
    check_positive_int("min_observations", value)
    if value < least:
        raise ValueError(
            f"min_observations={value} is too few for the {kind!r} sampler: "
            f"{_WHY_LEAST[kind]}; give min_observations >= {least} (default 8)"
        )
    if window is not None and value > window:
        raise ValueError(
            f"min_observations={value} can never be reached with window={window}: lower "
            f"min_observations or widen the window"
        )
    return int(value)


def top_count(quantile: float, observations: int) -> int:
    """How many of `observations` the high-loss density of the top `quantile` is made
    of: at least two (`density_warp.high_loss_warp`)."""
    return max(2, int(math.ceil(quantile * observations)))


def checked_quantile(quantile: float, window: int | None) -> None:
    """Refuse a `DensitySampler`'s `quantile` (already in (0, 1]) whose top is every
    observation however many the `window` keeps: 1, or with a window W one whose top
    of W observations is all W.

    Raises:
        ValueError: naming quantile, what it would do, and the fix.
    """
    every = quantile >= 1.0 if window is None else top_count(quantile, window) >= window
    if every:
        kept = (
            "every observation kept"
            if window is None
            else f"all {window} observations the window keeps"
        )
        most = "below 1" if window is None else f"at most {(window - 1) / window:g}"
        raise ValueError(
            f"quantile={quantile:g} takes {kept} as the high-loss ones: the "
            f"density would be of where the draws went, whatever their losses; give a "
            f"quantile {most} (default 0.25), share=0 for the design unwarped, or tilt= "
            f"to weigh every observation by its loss"
        )


def checked_evidence(evidence: float, window: int | None) -> None:
    """Refuse a `DensitySampler`'s `evidence` no parameter can reach with `window`
    observations: a rank correlation is at most 1, so the most is ``sqrt(window - 1)``.

    Raises:
        ValueError: naming evidence, the most, and the fix.
    """
    if window is None:
        return
    most = math.sqrt(window - 1)
    if evidence > most:
        raise ValueError(
            f"evidence={evidence:g} can never be reached with window={window}: a rank "
            f"correlation is at most 1, so the evidence of {window} losses is at most "
            f"sqrt({window} - 1) = {most:.3g} and no parameter would ever be warped; "
            f"lower evidence (default 3) or widen the window"
        )


def checked_tilt(tilt: float | None) -> None:
    """Refuse a `DensitySampler`'s `tilt` of 0 (`loss_tilt_warp`'s density is then flat).

    Raises:
        ValueError: naming tilt and the fix.
    """
    if tilt == 0.0:
        raise ValueError(
            "tilt=0 makes the density exp(0 x the loss profile), flat whatever the losses: "
            "the loss would steer nothing; give tilt > 0, tilt=None for the top quantile's "
            "density, or share=0 for the design unwarped"
        )


def checked_pool(pool: Any) -> int:
    """A `SurrogateSampler`'s `pool`, an int >= 2 (the best of one uniform candidate is
    a uniform draw).

    Raises:
        ValueError: naming pool and the fix.
    """
    check_positive_int("pool", pool)
    if pool < 2:
        raise ValueError(
            "pool=1 scores a single uniform candidate: every acquisition draw would be a "
            "uniform draw that no loss steers; give pool >= 2 (default 1024)"
        )
    return int(pool)


def uniform_within(sigma: float, terms: int = 50) -> float:
    """The most by which the density of a child bred with `sigma` (a Gaussian move in
    the unit interval, reflected at 0 and 1) departs from the uniform, relative, for
    any parent: reflection is a fold of period 2, whose Fourier coefficients are the
    Gaussian's, ``2 sum_k exp(-(k pi sigma)^2 / 2)``, summed over `terms`."""
    return 2.0 * sum(math.exp(-0.5 * (k * math.pi * sigma) ** 2) for k in range(1, terms + 1))


def checked_sigma(sigma: float) -> None:
    """Refuse a `BreedSampler`'s `sigma` (already > 0) above `SIGMA_MOST`.

    Raises:
        ValueError: naming sigma, what it would do, and the fix.
    """
    if sigma > SIGMA_MOST:
        raise ValueError(
            f"sigma={sigma:g} moves a child by more than the whole range: reflected at "
            f"the bounds it is uniform within {100 * uniform_within(sigma):.2g}%, whatever "
            f"its parent, and no loss would steer it; give sigma <= {SIGMA_MOST:g} "
            f"(default 0.15)"
        )
