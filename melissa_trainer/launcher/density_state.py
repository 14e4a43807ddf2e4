"""`DensitySampler`'s checkpoint: its state, and the checks a state passes before a
sampler continues from it (`DensityState`, its base class).

Kept apart from `density`, whose draws it does not touch: what a state holds is the
observations (`AdaptiveSampler`), the draws made (`drawn`, over the varying parameters
in the unit cube, how many with the loss warp and how many it bent), the design's position
(`design_state`) and the simulations given up with their replacements
(`density_replace`). Not thread-safe (the launcher's lock).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.density_replace import (
    load_replacements,
    replacement_state,
    unit_points,
)
from melissa_trainer.launcher.exploration import Exploration

__all__ = ["EDGE_BEFORE_CHECKED", "DensityState"]

#: the `edge` of a state saved before `edge` was checked on load (states without it):
#: the default it has had since the sampler was written (`DensityState._refuse_other`)
EDGE_BEFORE_CHECKED = 0.7


class DensityState(AdaptiveSampler):
    """The state of a `DensitySampler` (which sets the attributes declared here)."""

    #: draws made with the loss warp
    warped: int
    #: of those, the draws the loss bent (some parameter's marginal moved by the
    #: high-loss density, not the design's alone); None: unknown (a state saved before
    #: it was counted)
    bent: int | None
    #: replacements drawn for simulations given up (`density_replace`)
    replaced: int
    _drawn: list[list[float]]
    _design: Exploration
    _failed: list[list[float]]
    _varying: np.ndarray
    _unit_rows: dict[int, np.ndarray]

    def _new_design(self) -> Exploration:
        raise NotImplementedError  # (`DensitySampler`'s)

    def _refuse_other(self, state: Mapping[str, Any]) -> None:
        """As `AdaptiveSampler._refuse_other`, `edge` included. A state saved before
        `edge` was among the checked options (it was not written in the state then) is
        read as saved with `EDGE_BEFORE_CHECKED`, the default `edge` has had since the
        sampler exists: it resumes under that default, and is refused under another
        (its draws would change after the resume). A run saved then with another
        `edge` cannot be told apart: it is refused, or must be resumed with the
        default."""
        if "edge" not in state:
            state = {**state, "edge": EDGE_BEFORE_CHECKED}
        super()._refuse_other(state)

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "warped": self.warped,
            "bent": self.bent,
            "drawn": [list(point) for point in self._drawn],
            "design_state": self._design.state_dict(),
            **replacement_state(self._failed, self.replaced),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a `state_dict()` of a sampler built with the same arguments.

        Raises:
            ValueError: a state of another kind or options, or a malformed part; nothing
                changes then.
        """
        self._refuse_other(state)
        warped, design_state = state.get("warped"), state.get("design_state")
        if isinstance(warped, bool) or not isinstance(warped, int) or warped < 0:
            raise ValueError(f"sampler state has an invalid warped count {warped!r}")
        if not isinstance(design_state, Mapping):
            raise ValueError(f"sampler state has no design_state: {design_state!r}")
        design = self._new_design()
        design.load_state_dict(design_state)
        width = int(self._varying.sum())
        failed, replaced = load_replacements(state, width)
        position = design.explored + replaced
        if position != state.get("position") or warped > position:
            raise ValueError(
                f"sampler state has {design.explored} design draws and {replaced} "
                f"replacements ({warped} warped), not its position {state.get('position')!r}"
            )
        bent = state.get("bent", None if position else 0)  # (absent: saved before it was)
        invalid = isinstance(bent, bool) or not isinstance(bent, int) or not 0 <= bent <= warped
        if bent is not None and invalid:
            raise ValueError(f"sampler state has an invalid bent count {bent!r} ({warped} warped)")
        drawn = unit_points("drawn", state.get("drawn"), width, position)
        super().load_state_dict(state)
        self._design, self.warped, self.bent = design, warped, bent
        self._failed, self.replaced = failed, replaced
        self._unit_rows, self._drawn = {}, drawn
