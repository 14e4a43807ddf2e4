"""The surrogate acquisition's `spacing` (`launcher.surrogate.SurrogateSampler`): how
far an acquisition draw keeps from every draw remembered, and what it keeps once the
space fills up (user trial 31).

An acquisition takes the best-scored candidate at least `spacing` from every draw
remembered. A space holds only so many points that far apart (a 1-D study about 10 at
0.1, a 2-D one about 80): past them no candidate keeps `spacing`. The acquisition then
keeps what the candidates allow instead: **half the largest gap** a candidate reaches
(its distance to the nearest draw remembered), the best-scored among the candidates at
least that far. Half, not the largest: the score still chooses, among the candidates
of the emptiest regions rather than the one point farthest from every draw (which would
make every acquisition an exploration draw); and no acquisition lands nearer an earlier
draw than half what the space leaves, never on one while any candidate is farther.
Until then nothing changes: a candidate that keeps `spacing` is chosen as before, the
same draws (the A/B figures of `benchmarks/surrogate_spacing_ab.py` stand).

(The spacing once dropped at once, silently: the acquisitions piled onto the
best-scored spot again, exact duplicates of earlier simulations, trial 31.)

The kept spacing depends on the draw's candidates and the draws remembered alone, no
state: a resumed sampler draws the same as an uninterrupted one.
"""

from __future__ import annotations

import logging

import numpy as np

from melissa_trainer.launcher.log_lines import inform

__all__ = ["SHRINK", "kept_spacing", "say_shrunk"]

logger = logging.getLogger("melissa_trainer.launcher")

#: the share of the largest candidate gap an acquisition keeps once no candidate keeps
#: `spacing` (module docstring)
SHRINK = 0.5


def kept_spacing(gaps: np.ndarray, spacing: float) -> float:
    """The least distance an acquisition keeps from every draw remembered, given the
    allowed candidates' `gaps` (each one's distance to its nearest draw remembered; inf:
    none remembered): `spacing` while a candidate keeps it, else `SHRINK` times the
    largest gap (0 with no candidate, or every one on a draw: then nothing is kept, as
    with every parameter fixed, where every point is the one draw)."""
    largest = float(np.max(gaps, initial=0.0))
    return spacing if largest >= spacing else SHRINK * largest


def say_shrunk(spacing: float, remembered: int, kept: float) -> None:
    """Log (INFO, the sampler says it once) that no candidate keeps `spacing` from the
    `remembered` draws, and the spacing `kept` instead: not a fault, a space filling up."""
    inform(
        logger,
        f"surrogate sampler: no candidate keeps spacing={spacing:g} from the {remembered} "
        "draws remembered (the space is filling up at that spacing): acquisitions now keep "
        f"half the largest gap the candidates reach ({kept:.3g} at this draw; said once)",
    )
