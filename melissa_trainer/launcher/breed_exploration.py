"""`ExplorationDraws`: the exploration draws of a `BreedSampler`, its explorer's points
and the replacements of the simulations given up.

The explorer (`exploration.Exploration`) gives a sequence's next point, gap-filling or
not, or the next point of the optimised Latin hypercube of the planned draws. With the
"lhs" explorer, once the planned design's points are all explored, each exploration
draw due as a replacement of a simulation given up is a point whose nearest draw
(drawn, remembered or given up) was not given up (`Exploration.away_from`, as
`DensitySampler`'s; `launcher.density_replace` says why), not a point of a second
optimised design. With a sequence explorer the sequence's next point is (nothing kept).

A resume refused for an exploration option that differs names the default that
changed, if one did (`default_changed`).

Not thread-safe, as the sampler that holds it (the launcher draws under its lock).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.launcher.density_replace import (
    load_replacements,
    replacement_state,
    replacing,
)
from melissa_trainer.launcher.exploration import Exploration
from melissa_trainer.launcher.explorers import AUTO_SEQUENCE_DIMS

__all__ = ["ExplorationDraws", "default_changed"]


class ExplorationDraws:
    """The exploration draws made with `explorer` (module docstring).

    Args:
        explorer: the sampler's explorer, new or loaded (`loaded`).
    """

    def __init__(self, explorer: Exploration) -> None:
        self.explorer = explorer
        #: the draws `plan` announced (None: unplanned, the design's size)
        self.budget: int | None = None
        #: "lhs": the simulations given up (`given_up`), over the varying parameters in
        #: the unit cube; and how many replacement draws were made for them
        self.failed: list[list[float]] = []
        self.replaced = 0

    @property
    def explored(self) -> int:
        """How many exploration draws were made (the replacements included)."""
        return self.explorer.explored + self.replaced

    @property
    def design_size(self) -> int | None:
        """The points of the Latin hypercube the draws come from ("lhs"; None until
        planned or first drawn), None for a sequence."""
        return self.explorer.size if self.explorer.engine == "lhs" else None

    def plan(self, n_draws: int) -> None:
        """The study's `n_draws`: the planned design's size ("lhs"), after which the
        draws due are replacements. Nothing is computed (`prepare` does)."""
        self.budget = int(n_draws)
        self.explorer.plan(n_draws)

    def prepare(self) -> None:
        """The "lhs" design computed now, unless it is held or the planned budget is
        all drawn (the next draws are replacements, which need none)."""
        if self.budget is None or self.explorer.explored < self.budget:
            self.explorer.prepare()

    def given_up(self, unit: np.ndarray) -> None:
        """A simulation given up at `unit` (over the varying parameters in the unit
        cube): with the "lhs" explorer one more replacement is due."""
        if self.explorer.engine == "lhs":
            self.failed.append(unit.tolist())

    def draw(self, index: int) -> np.ndarray:
        """Draw `index`'s exploration point: the explorer's next, or a replacement."""
        explorer = self.explorer
        if not replacing(explorer, self.budget, len(self.failed), self.replaced):
            return explorer.draw()
        failed = np.asarray(self.failed, dtype=np.float64)
        drawn = np.concatenate([explorer.design_drawn(), explorer.drawn, failed])
        self.replaced += 1
        return explorer.away_from(index, drawn, failed)

    def drawn(self) -> np.ndarray:
        """The points drawn so far that exploration keeps away from: the design's
        drawn ones and those remembered (`remember`)."""
        out: np.ndarray = np.concatenate([self.explorer.design_drawn(), self.explorer.drawn])
        return out

    def remember(self, unit: np.ndarray) -> None:
        """Every draw, bred or explored: gap-filling keeps away from all of them."""
        self.explorer.remember(unit)

    def state_dict(self) -> dict[str, Any]:
        return {
            "exploration_state": self.explorer.state_dict(),
            # (none without failures: such a state is as it was before replacements)
            **replacement_state(self.failed, self.replaced),
        }

    def loaded(
        self, state: Mapping[str, Any], explorer: Exploration, dims: int
    ) -> ExplorationDraws:
        """New draws with the sampler's `state` loaded into `explorer` (a new one) and
        this one's budget; `dims`: the varying parameters. Raises ValueError for a state
        that does not hold them, before anything changes."""
        exploration_state = state.get("exploration_state")
        if not isinstance(exploration_state, Mapping):
            raise ValueError(f"sampler state has no exploration_state: {exploration_state!r}")
        explorer.load_state_dict(exploration_state)  # checked before anything changes
        draws = ExplorationDraws(explorer)
        draws.budget = self.budget
        draws.failed, draws.replaced = load_replacements(state, dims)
        return draws


def default_changed(
    key: str, saved: Any, explorer: str, engine: str, candidates_named: bool, varying: int
) -> str:
    """What a resume refused because the option `key` differs from its `saved` value
    adds when a default changed since (" (... pass candidates=16 to resume this state)"),
    else "": `candidates` left None with the "lhs" `engine` (it took 16 before), or the
    `explorer` "auto" (`engine` for `varying` parameters; "sobol" before)."""
    if key == "candidates" and engine == "lhs" and not candidates_named:
        return (
            f" (with the 'lhs' explorer, candidates=None takes 1, the design in its "
            f"order; it took 16 before: pass candidates={saved!r} to resume this state)"
        )
    if key != "explorer" or explorer != "auto":
        return ""
    return (
        f" (explorer 'auto' explores with {engine!r} for {varying} varying parameters: "
        f"'sobol' up to {AUTO_SEQUENCE_DIMS}, 'lhs' above; the default was 'sobol' before: "
        f"pass explorer={saved!r} to resume this state)"
    )
