"""What an adaptive sampler did with a study's draws, and what it cannot do: the
sampler's part of the study's account (`launcher.account`).

`sampler_line` is the account's line on the sampler at a study's end: its draws, what
steered them in its own terms (`drawn_by`: Breed's explored and bred draws, the
surrogate's acquired ones, the density sampler's warped ones and the parameters its
loss bends now), and how many simulations' losses it held. `static_sampler` says, when
a study starts, why an adaptive sampler can steer none of the draws left (Breed's
``exploration=1.0``, fewer losses than its `min_observations` or its `evidence` needs
before the study's last draw), and `warn_static_sampler` logs it as a WARNING. Pure
formatting: each reads the sampler it is given and changes none of its draws (the
density sampler's current warp is computed, and cached, if its observations changed
since its draw); a fixed design gets None from each. `account.log_account` calls
`sampler_line` after the launcher's thread has stopped; the launcher calls
`warn_static_sampler` when a study starts.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.density import DensitySampler
from melissa_trainer.launcher.density_warp import UNIT_GRID, beta_cdf
from melissa_trainer.launcher.log_lines import warn
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.surrogate import SurrogateSampler

__all__ = ["drawn_by", "sampler_line", "static_sampler", "warn_static_sampler"]

logger = logging.getLogger("melissa_trainer.launcher")  # (the account's, as before the split)


def sampler_line(sampler: Sampler, draws: Path | None = None) -> str | None:
    """What an adaptive sampler did: its draws and what steered them (`drawn_by`), how
    many simulations' losses it holds, and how many it held at its last draw (the
    later ones could steer none), and where each draw is recorded (`draws`, the
    launcher's `draw_log`); None for a fixed design, or before any draw. The one
    account of the sampler at a study's end (the examples print no other)."""
    if not isinstance(sampler, AdaptiveSampler) or sampler.position == 0:
        return None
    observed = len(sampler.observations)
    window = "" if sampler.window is None else f" (the last {sampler.window} kept)"
    at_draw = sampler.observed_at_draw  # (None: no draw in this run, resumed after the last)
    held = "" if at_draw is None else f", {at_draw} of them by its last draw"
    return (
        f"adaptive sampler: {drawn_by(sampler)}; the training losses of {observed} "
        f"simulations observed{window}{held}"
        + ("" if draws is None else f"; each draw, how it was drawn and its loss: {draws}")
    )


def drawn_by(sampler: AdaptiveSampler) -> str:
    """How `sampler`'s draws were made, in its own terms: Breed's explored and bred
    ones (and, with ``exploration=1.0``, its default, that none could be bred), the
    surrogate acquisition's explored and acquired ones, the density sampler's draws
    before and after its warp could apply and the parameters its loss warp bends now
    (with its `evidence` rule, a study of tens of simulations often bends none: the
    line says what a parameter needs). Another sampler: its number of draws."""
    draws = sampler.position
    if isinstance(sampler, BreedSampler):
        text = (
            f"of {plural(draws, 'draw')}, {sampler.explored} explored, "
            f"{draws - sampler.explored} bred "
            f"from the worst-trained simulations"
        )
        if sampler.replaced:  # (of the explored: `BreedSampler.failed`)
            text += (
                f" ({sampler.replaced} explored in place of simulations given up, where the "
                "nearest draw had not failed)"
            )
        final = sampler.exploration_final
        if sampler.exploration == 1.0 and final in (None, 1.0):
            text += (
                " (exploration=1.0, Breed's default: every draw explores, the losses "
                "steer none; exploration below 1 breeds that share of the draws)"
            )
        return text
    if isinstance(sampler, SurrogateSampler):
        return (
            f"of {plural(draws, 'draw')}, {sampler.explored} explored, "
            f"{draws - sampler.explored} chosen by the loss predictor"
        )
    if isinstance(sampler, DensitySampler):
        return _density_drawn(sampler)
    return plural(draws, "draw")


def static_sampler(sampler: Sampler, n_simulations: int) -> str | None:
    """Why the adaptive `sampler` can steer none of the draws left in a study of
    `n_simulations` (the losses it could hold before the study's last draw: those kept
    now and one per draw before it), or None (it can, or it is a fixed design).
    Bounds that fix every parameter leave nothing to steer (`AdaptiveSampler`);
    Breed's default, ``exploration=1.0``, never breeds; none can use fewer losses than
    its `min_observations`; the density sampler bends a parameter only from
    ``evidence**2 + 1`` losses on (a rank correlation of at most 1, times sqrt(n - 1))."""
    if not isinstance(sampler, AdaptiveSampler):
        return None
    if all(low == high for low, high in sampler.bounds.values()):
        return "every parameter is fixed (low == high): every draw is the one fixed point"
    final = getattr(sampler, "exploration_final", None)
    if isinstance(sampler, BreedSampler) and sampler.exploration == 1.0 and final in (None, 1.0):
        return (
            "exploration=1.0 (Breed's default): every draw explores; exploration below 1 "
            "breeds that share of the draws"
        )
    most = len(sampler.observations) + max(n_simulations - sampler.position - 1, 0)
    least = getattr(sampler, "min_observations", 0)
    if isinstance(sampler, DensitySampler):
        if sampler.share == 0.0:
            return "share=0: the design alone"
        least = max(least, math.ceil(sampler.evidence**2 + 1) if sampler.evidence > 0 else 0)
    if most < least:
        return (
            f"it needs {plural(least, 'loss', 'losses')} kept before a draw can use them "
            f"(min_observations"
            f"{', and the evidence' if isinstance(sampler, DensitySampler) else ''}), and a "
            f"study of {plural(n_simulations, 'simulation')} has at most {most} before its "
            f"last draw"
        )
    return None


def warn_static_sampler(sampler: Sampler, n_simulations: int) -> None:
    """Log `static_sampler`'s reason, a WARNING, when a study starts: an adaptive study
    that cannot adapt pays the per-simulation loss tracking for nothing."""
    why = static_sampler(sampler, n_simulations)
    if why is not None:
        kind = getattr(sampler, "kind", type(sampler).__name__)
        warn(
            logger,
            f"the {kind!r} sampler cannot steer any draw of this study: {why}. Its draws "
            "are its design's; the per-simulation losses are tracked all the same",
        )


def _density_drawn(sampler: DensitySampler) -> str:
    """`drawn_by` for a `DensitySampler`: its `warped` count is of the draws made with
    `min_observations` losses kept (share > 0), whether or not a parameter had the
    `evidence` to be bent; which ones the loss bends now is read off its `warp`."""
    draws, warped, bent_draws = sampler.position, sampler.warped, sampler.bent
    text = (
        f"of {plural(draws, 'draw')}, {draws - warped} before "
        f"min_observations={sampler.min_observations} losses were kept, {warped} with the "
        f"high-loss warp"
    )
    if bent_draws is not None and warped:  # (None: resumed from a state that did not count)
        text += (
            f" ({bent_draws} of them bent by the loss, {warped - bent_draws} the design's alone)"
        )
    if sampler.replaced:  # (`density_replace`)
        text += (
            f" ({sampler.replaced} in place of simulations given up, where the nearest "
            "draw had not failed)"
        )
    if sampler.share == 0.0:
        return text + " (share=0: the design alone)"
    kept = len(sampler.observations)
    if kept < sampler.min_observations:
        return text
    varying = [name for name, (low, high) in sampler.bounds.items() if high > low]
    # None: the identity (edge 1 and no parameter bent); else a parameter the loss
    # leaves alone keeps the design's marginal, Beta(edge, edge) (the identity with 1)
    warps = sampler.warp()
    base = UNIT_GRID if sampler.edge == 1.0 else beta_cdf(sampler.edge)
    pairs = zip(varying, warps or [], strict=warps is not None)
    bent = [name for name, (cdf, _) in pairs if not np.array_equal(cdf, base)]
    if bent:
        return text + f"; the loss bends {', '.join(bent)} now"
    needed = sampler.evidence / math.sqrt(kept - 1) if kept > 1 else math.inf
    design = "as it is (edge=1)" if sampler.edge == 1.0 else "bent towards the bounds alone (edge)"
    return text + (
        f"; the loss bends no parameter now: with evidence={sampler.evidence:g}, one needs a "
        f"rank correlation with the loss of at least {needed:.2f} over the "
        f"{plural(kept, 'loss')} kept "
        f"(evidence / sqrt(n - 1){', above 1: impossible' if needed > 1 else ''}); the draws "
        f"follow the design {design}; lower evidence, or give the study more simulations "
        f"(a rank correlation sees a loss that grows with a parameter, not one high at both "
        f"ends of its range or on a difference between two parameters)"
    )
