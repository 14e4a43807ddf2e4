"""The replacement draws of `DensitySampler`: what it draws in place of a simulation
given up (`Sampler.failed`) once its planned design is all drawn.

Why: the design is the optimised Latin hypercube of the study's budget (`plan`, the
launcher's `n_simulations`). A simulation given up for good is redrawn (the launcher's
``on_failure="redraw"``, its default), so a study with failures draws past the design.
Before, each such draw took a point of the *next* design of the same size, optimised
on the launcher's thread under the launcher's lock when the first was needed (about a
second of CPU for 12 to 1,024 points in 12 dimensions on the busy development machine,
while the trainer's loss reports and checkpoints waited on the lock), of which the
study used one point per failure, placed with no regard for where the draws had
failed. Now the planned design is drawn whole and unchanged, and each replacement is a
point of the design's space (uniform there: it follows the design's marginals, warped
as the design's points are) whose nearest draw was not given up
(`Exploration.away_from`, no design computed): a solver that fails for some
parameters usually fails in a region, and a draw next to a failed one is likelier to
fail again.

Which draws are replacements: once the design's `budget` points are drawn, as many as
the simulations given up so far that none replaced yet (a sampler told of none, or
drawn past its replacements, continues with the next design as before). Deterministic
(draw `index`'s candidates are seeded with ``[seed, 47, index]``) and resumable (the
points given up and the count replaced are in the sampler's state, from the first
failure on; the budget is `plan`'s, which the launcher calls before a resume).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.exploration import Exploration

__all__ = [
    "latent_points",
    "load_replacements",
    "replacement",
    "replacement_state",
    "replacing",
    "unit_points",
]


def replacing(design: Exploration, budget: int | None, failures: int, replaced: int) -> bool:
    """The next draw is a replacement: the design's planned `budget` points (its size
    when unplanned) are all drawn, and a simulation given up has no replacement yet."""
    planned = budget if budget is not None else design.size
    return planned is not None and design.explored >= planned and replaced < failures


def replacement(
    design: Exploration,
    index: int,
    drawn: list[list[float]],
    failed: list[list[float]],
    warps: list[tuple[np.ndarray, np.ndarray]] | None,
) -> np.ndarray:
    """Draw `index`'s point of the unit cube in the design's space (the sampler warps
    it as any design point): `Exploration.away_from` the draws so far (`drawn`, over
    the varying parameters) that were given up (`failed`), each mapped back through the
    current warp's distribution function (`warps`, None: the identity) to where the
    design placed it."""
    return design.away_from(index, latent_points(drawn, warps), latent_points(failed, warps))


def latent_points(
    points: list[list[float]], warps: list[tuple[np.ndarray, np.ndarray]] | None
) -> np.ndarray:
    """`points` (rows over the varying parameters, in the unit cube) where the design
    placed them: through the current warp's distribution functions."""
    rows = np.asarray(points, dtype=np.float64).reshape(len(points), -1)
    if warps is None or not rows.size:  # (none, or every parameter fixed: empty rows)
        return rows
    return np.stack([np.interp(rows[:, j], grid, cdf) for j, (cdf, grid) in enumerate(warps)], 1)


def replacement_state(failed: list[list[float]], replaced: int) -> dict[str, Any]:
    """The sampler state's entries for its replacements: none while no simulation was
    given up (the state of a study without failures is as it was before replacements
    existed). The budget is not in it: `plan` gives it again, before a resume."""
    if not failed:
        return {}
    return {"failed": [list(p) for p in failed], "replaced": replaced}


def load_replacements(state: Mapping[str, Any], width: int) -> tuple[list[list[float]], int]:
    """(failed, replaced) of a sampler state, checked (`width`: the varying parameters);
    none in a state without them.

    Raises:
        ValueError: a malformed entry, or more replacements than failures.
    """
    failed, replaced = state.get("failed", []), state.get("replaced", 0)
    if isinstance(replaced, bool) or not isinstance(replaced, int) or replaced < 0:
        raise ValueError(f"sampler state has an invalid replaced count {replaced!r}")
    points = unit_points("failed", failed, width)
    if replaced > len(points):
        raise ValueError(
            f"sampler state has {plural(replaced, 'replacement')} for "
            f"{plural(len(points), 'simulation')} given up"
        )
    return points, replaced


def unit_points(name: str, saved: Any, width: int, count: int | None = None) -> list[list[float]]:
    """The sampler state's list `name` of points of the unit cube over `width` varying
    parameters (`count` of them, if given), as floats.

    Raises:
        ValueError: not such a list (the message names it).
    """
    if (
        not isinstance(saved, list)
        or (count is not None and len(saved) != count)
        or not all(
            isinstance(p, list)
            and len(p) == width
            and all(isinstance(v, float | int) and not isinstance(v, bool) for v in p)
            and all(0.0 <= v <= 1.0 for v in p)
            for p in saved
        )
    ):
        raise ValueError(f"sampler state has malformed {name} points: {str(saved)[:80]}")
    return [[float(v) for v in p] for p in saved]
