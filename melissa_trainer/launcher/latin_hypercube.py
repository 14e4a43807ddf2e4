"""`LatinHypercubeSampler`: Latin hypercube designs of the box, one after another, and
the replacements of the simulations given up once the planned draws are made.

One of the box samplers `launcher.samplers` names (and re-exports): "lhs" for
`make_sampler`. Seeded and resumable as they all are (`sampler_base.Sampler`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.common.checks import check_positive_int
from melissa_trainer.launcher.density_replace import load_replacements, replacement_state
from melissa_trainer.launcher.replacement_points import away_from
from melissa_trainer.launcher.sampler_base import Bounds, BoxSampler, qmc_engine

__all__ = ["LatinHypercubeSampler"]


class LatinHypercubeSampler(BoxSampler):
    """Latin hypercube designs (`scipy.stats.qmc.LatinHypercube`) in `bounds`.

    Every consecutive `batch` draws form one design: each parameter's range is cut into
    `batch` equal strata, each hit once. Design `k` is seeded by ``[seed, k]``.

    A simulation given up (`failed`): once the planned draws (`plan`) are all made,
    each draw due as a replacement is a point whose nearest draw (of the last design's
    drawn points and those given up) was not given up (`replacement_points.away_from`, as
    Breed's and the density sampler's; `launcher.density_replace` says why), not a
    point of the next design wherever it lies, as before. Told nothing, it is unchanged.

    Args:
        batch: the size of each design. None: the `n_draws` that `plan` announces (the
            launcher plans `n_simulations`, so the study's first design is exactly its
            simulations); calling `draw` on an unplanned sampler with `batch=None` raises.
    """

    kind = "lhs"

    def __init__(self, bounds: Bounds, seed: int = 0, batch: int | None = None) -> None:
        super().__init__(bounds, seed)
        if batch is not None:
            check_positive_int("batch", batch)
        self.batch = batch
        self._design: tuple[int, np.ndarray] | None = None
        self._budget: int | None = None  # the draws `plan` announced
        #: the simulations given up (`failed`), over the varying parameters in the unit
        #: cube; and how many replacement draws were made for them
        self._failed: list[list[float]] = []
        self.replaced = 0

    def plan(self, n_draws: int) -> None:  # noqa: B027 - optional, a no-op by default
        if self.position == 0 and n_draws >= 1:
            self._budget = int(n_draws)
            if self.batch is None:
                self.batch = int(n_draws)

    def failed(self, simulation_id: int, parameters: Mapping[str, float]) -> None:
        """A simulation given up: one more replacement is due (class docstring)."""
        self._failed.append(self._unit(parameters)[self._span > 0].tolist())

    def _points(self, number: int) -> np.ndarray:
        """Design `number`'s points (the unit cube), held until another is needed."""
        assert self.batch is not None
        if self._design is None or self._design[0] != number:
            engine = qmc_engine("LatinHypercube", len(self.names), [self.seed, number])
            self._design = (number, engine.random(self.batch))
        return self._design[1]

    def _draw(self, index: int) -> dict[str, float]:
        if self.batch is None:
            raise ValueError(
                "LatinHypercubeSampler(batch=None) does not know its design size: pass "
                "batch=, or let a Launcher plan it (its n_simulations)"
            )
        budget = self._budget
        if budget is not None and index >= budget and self.replaced < len(self._failed):
            last, row = divmod(budget - 1, self.batch)  # the planned draws' last design
            varying = self._span > 0
            failed = np.asarray(self._failed, dtype=np.float64)
            failed = failed.reshape(len(self._failed), int(varying.sum()))  # (0 varying too)
            drawn = np.concatenate([self._points(last)[: row + 1, varying], failed])
            unit = np.zeros(len(self.names))
            unit[varying] = away_from(self.seed, index, int(varying.sum()), drawn, failed)
            self.replaced += 1
            return self._scale(unit)
        number, row = divmod(index, self.batch)
        return self._scale(self._points(number)[row])

    def state_dict(self) -> dict[str, Any]:
        # (no replacement entries without failures: such a state is as it was before)
        state = {**super().state_dict(), "batch": self.batch}
        return {**state, **replacement_state(self._failed, self.replaced)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state.get("batch")
        if self.batch is not None and saved is not None and saved != self.batch:
            raise ValueError(f"sampler state has batch={saved} but this sampler has {self.batch}")
        failed, replaced = load_replacements(state, int((self._span > 0).sum()))
        super().load_state_dict(state)
        if saved is not None:
            self.batch = int(saved)
        self._failed, self.replaced = failed, replaced
