"""`DensitySampler`: a space-filling design bent towards the parameters the surrogate
trains worst on, one parameter at a time (issue 46).

Why not the Gaussian-process acquisition (`launcher.surrogate`): on the 6- and
12-parameter heat studies of `benchmarks/active_sampling.py` it put 40% of its draws
in the last seventh of the diffusivity's range and 3% in the fourth seventh (tuning
seeds, `benchmarks/active_sampling_fast.py`): the regions it starved then held the
worst held-out simulations, and the optimised Latin hypercube beat it on the mean and
on the tails. In 6-12 dimensions, with tens of simulations, coverage is what bounds
the worst case; this sampler keeps the coverage of a Latin hypercube and only changes
how densely each parameter's range is covered:

- the **design**: the optimised Latin hypercube of the planned budget, in its order
  (`exploration.Exploration`, ``"lhs"``; `plan` sets its size, `prepare` computes it,
  as the `Launcher` does when started; a resumed state holds it), each varying
  coordinate mapped through the quantiles of Beta(`edge`, `edge`) (default 0.7: more
  points near the bounds, where a surrogate extrapolates and its worst held-out errors
  are; 1: uniform, the design itself);
- the **high-loss density** (as OGAS trains a density model on high-loss parameters;
  `melissa_trainer.launcher.density_warp`; the sampler's warp, `density_loss_warp`): per
  varying parameter, a kernel density of
  the positions of the observations in the top `quantile` of the detrended log loss
  (or with `tilt` a kernel regression of all of them), on the parameters with
  `evidence` that the loss depends on them only (the others keep the design's
  marginal): a product of one-dimensional densities, as with tens of observations a
  joint density over 12 dimensions would be noise;
- each draw takes the design's next point ``u`` and maps every varying coordinate
  through the inverse distribution function of ``(1 - share) x design marginal + share
  x density``: a monotone warp per parameter, so the draws stay stratified (one per
  stratum of the warped distribution) and no region gets less than ``1 - share`` of
  its design share. Below `min_observations` observations there is no density.
- a simulation given up (`failed`) is replaced, once the design is all drawn, by a
  point of the design's space whose nearest draw was not given up, not by a design
  past the budget (`melissa_trainer.launcher.density_replace` says why and holds it).
- `contrast` (issue 46, fourth round; default "auto": 0.25 above 6 varying parameters,
  none up to 6, where on tuning seeds it cost the mean 13%): a draw that the warp puts
  inside the high-loss region (its `hardness`) takes the parameters the warp leaves
  alone through Beta(e, e), ``e`` from `edge` outside the region to `contrast` at its peak:
  there the draws go to the largest contrasts between those parameters (at 12
  parameters the worst held-out simulations were at extreme temperature contrasts
  with fast diffusion), elsewhere the design's marginal is kept. This one departs
  from one point per stratum (a draw's marginal depends on its hardness).
  `melissa_trainer.launcher.density_contrast` holds it.

Cost per draw: O(observations x grid) for the densities of the warped parameters only
(a parameter without `evidence` weighs 0 and is not computed; docs/measured.md, issue
46); the design's optimisation (O(size^2) per pass, seconds for 48 points in 12
dimensions) runs in `prepare`, before the study (not again on a resume: the state
holds the design), and again every `size` draws for a longer study. Deterministic
(draw `i` depends on the seed, `i` and the observations made before it) and
resumable: the state holds the observations, the design and its position. Not
thread-safe (the launcher's lock).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.common.checks import check_positive_int
from melissa_trainer.launcher.density_contrast import contrast_for, hardness, sharpen
from melissa_trainer.launcher.density_loss_warp import LossWarp
from melissa_trainer.launcher.density_replace import latent_points, replacement, replacing
from melissa_trainer.launcher.density_warp import UNIT_GRID
from melissa_trainer.launcher.exploration import Exploration
from melissa_trainer.launcher.sampler_base import Bounds, bounded_number
from melissa_trainer.launcher.sampler_options import (
    checked_evidence,
    checked_min_observations,
    checked_quantile,
    checked_tilt,
)

# (the density functions are `density_warp`'s, the contrast's `density_contrast`'s; named
# here too, their import path before)
__all__ = ["DensitySampler"]


class DensitySampler(LossWarp):
    """The optimised Latin hypercube of the budget, each parameter's range warped
    towards where the observed high-loss simulations lie (module docstring).

    Args:
        bounds: `{name: (low, high)}`.
        seed: the seed of the design (the same points as an unwarped design of it).
        share: the weight of the high-loss density in each parameter's distribution,
            in [0, 1] (0: the design unwarped). For the observations kept, a region's
            probability is ``(1 - share) x design + share x density``: a higher share
            draws more where the density exceeds the design, fewer elsewhere. The
            density only knows the regions the draws so far visited: in a study a
            higher share can give fewer draws in the hard region, and at 1 (no floor)
            a region the first draws missed may never be drawn
            (`tests/launcher/test_density_share.py`); keep it below 1.
        quantile: the top fraction of the observations whose positions make the
            density (at least two), in (0, 1]; with `share` > 0 and no `tilt`, not so
            high that it is every one of `window` observations (`checked_quantile`:
            below 1, at most (W - 1) / W for a window of W); 1 is taken with
            `share` = 0 or a `tilt`, where it is unread.
        bandwidth: the kernels' standard deviation, in units of a parameter's range (> 0).
        window: how many observations are kept (the newest); None: all.
        min_observations: no warp until this many are kept, from 3 to `window`.
        candidates: 1: each draw is the design's next point; K > 1: of the design's
            first K unused points, the one farthest from the draws so far as the
            current warp places them in the design's cube (the warp moves, the draws
            keep their distances in its metric: denser where the density is higher).
        edge: the design's marginal of every varying parameter is Beta(edge, edge)
            before any loss is seen: 1 uniform, below 1 denser near the bounds, where
            a surrogate extrapolates and errs most.
        evidence: a parameter is warped only where the rank correlation of the scores
            with it, times sqrt(n - 1), reaches this (0: every parameter): with tens of
            observations the density of a parameter the loss ignores is noise. At most
            sqrt(`window` - 1) when `share` > 0 (the most a window's losses show).
        tilt: None: the density is that of the top `quantile` (`high_loss_warp`); a
            number in (0, 100]: ``exp(tilt x`` the loss profile ``)`` (`loss_tilt_warp`).
        contrast: "auto": `CONTRAST` above `CONTRAST_FROM - 1` varying parameters (and
            below `edge`), else None (`contrast_for`). None: every draw's unwarped
            parameters follow Beta(`edge`, `edge`); a number in (0, `edge`] (at most 10;
            above `edge` it is refused: it would push them towards the middle, the
            opposite): in a draw inside the high-loss region (`hardness` h,
            from 0 outside to 1 at the density's peak) they follow Beta(e, e), ``e =
            edge^(1 - h) x contrast^h`` (below `edge`: nearer their bounds, the largest
            contrasts between them, where the worst held-out simulations were in
            `benchmarks/active_sampling.py`), elsewhere the design's marginal.

    Raises:
        ValueError: an option out of range (the message names it).
    """

    kind = "density"

    def __init__(
        self,
        bounds: Bounds,
        seed: int = 0,
        *,
        share: float = 0.5,
        quantile: float = 0.25,
        bandwidth: float = 0.1,
        window: int | None = 100,
        min_observations: int = 8,
        tilt: float | None = None,
        candidates: int = 1,
        evidence: float = 3.0,
        edge: float = 0.7,
        contrast: float | str | None = "auto",
    ) -> None:
        super().__init__(bounds, seed, window)
        self.share = bounded_number("share", share, 0.0, 1.0)
        self.quantile = bounded_number("quantile", quantile, 0.0, 1.0, low_open=True)
        self.bandwidth = bounded_number("bandwidth", bandwidth, 0.0, 10.0, low_open=True)
        self.min_observations = checked_min_observations("density", min_observations, window)
        self.tilt = None if tilt is None else bounded_number("tilt", tilt, 0.0, 100.0)
        self.candidates = check_positive_int("candidates", candidates)
        self.evidence = bounded_number("evidence", evidence, 0.0, 100.0)
        checked_tilt(self.tilt)
        if self.share > 0.0:  # (unread where nothing warps; the quantile, with a tilt)
            checked_evidence(self.evidence, window)
            if self.tilt is None:
                checked_quantile(self.quantile, window)
        self.edge = bounded_number("edge", edge, 0.0, 10.0, low_open=True)
        self._varying = self._span > 0
        #: the varying parameters' columns (read-only; every draw reads them)
        self._columns = np.flatnonzero(self._varying)
        self._columns.flags.writeable = False
        self.contrast = contrast_for(contrast, len(self._columns), self.edge)
        #: per varying parameter, the pure high-loss density on the grid where the warp
        #: bends it (the parameters with the evidence), else None (`warp` sets it)
        self._hard: list[np.ndarray | None] = []
        self._design = self._new_design()
        #: every draw so far, over the varying parameters, in the unit cube
        self._drawn: list[list[float]] = []
        #: simulation id -> its observation's varying coordinates in the unit cube
        #: (`_points`), for the observations kept
        self._unit_rows: dict[int, np.ndarray] = {}
        #: draws made with a warp (the others are the design's points as they are)
        self.warped = 0
        #: of those, the draws in which the loss bent some parameter (`DensityState.bent`:
        #: the others follow the design, bent towards the bounds by `edge` alone)
        self.bent: int | None = 0
        #: `warp`'s last result: (what it depends on, its warps, `_hard`)
        self._warp_memo: tuple[Any, Any, tuple[np.ndarray | None, ...]] | None = None
        #: the draws `plan` announced (None: unplanned, the design's size)
        self._budget: int | None = None
        #: the simulations given up (`failed`), over the varying parameters in the unit
        #: cube as `_drawn`; and how many replacements were drawn for them
        self._failed: list[list[float]] = []
        self.replaced = 0

    def _new_design(self) -> Exploration:
        memory = None if self.candidates > 1 else 1000
        return Exploration(
            "lhs", len(self.names), self.seed, self._varying, self.candidates, memory
        )

    def plan(self, n_draws: int) -> None:
        """The design's size becomes `n_draws` (before the first draw; the `Launcher`
        calls it with the study's budget, when it is built). Nothing is computed: a
        resume would replace it (`prepare` computes the design, unless a loaded state
        held it)."""
        if self.position == 0:
            self._budget = int(n_draws) if n_draws >= 1 else None
            self._design.plan(n_draws)

    def prepare(self) -> None:
        """The design the next draw takes its point from, computed now (`Sampler.prepare`:
        the `Launcher`'s `start` calls it, so that its optimisation, seconds for a few
        hundred points, is not paid on the launcher's thread while the trainer trains),
        unless it is held (a resumed state holds it) or the planned budget is all drawn
        (the next draws are replacements, which need none). The draws are the same."""
        if self._budget is None or self._design.explored < self._budget:
            self._design.prepare()

    def failed(self, simulation_id: int, parameters: Mapping[str, float]) -> None:
        """A simulation given up (`Sampler.failed`): one more replacement is due. Once
        the whole planned design is drawn, each draw due as a replacement is a point of
        the design's space whose nearest draw was not given up (`density_replace`),
        not a point of a design past the budget."""
        self._failed.append(self._unit(parameters)[self._varying].tolist())

    @property
    def failures(self) -> int:
        """Simulations given up so far (`failed`)."""
        return len(self._failed)

    @property
    def explored(self) -> int:
        """Draws made unwarped (too few observations, or ``share=0``)."""
        return self.position - self.warped

    def hardness(self, unit: np.ndarray) -> float:
        """How deep `unit` (a point of the unit cube over every parameter) lies in the
        high-loss region of the current warp (`density_contrast.hardness`). Valid after
        `warp`."""
        return hardness(unit, self._columns, self._hard)

    def _loss_warped(self) -> bool:
        return self.share > 0.0 and len(self._losses) >= self.min_observations

    def _propose(self, index: int) -> dict[str, float]:
        warps = self.warp()
        columns = self._columns
        if warps is not None and self.candidates > 1 and self._drawn:
            # the draws so far where the current warp puts them in the design's cube: the
            # design's next point is the unused one farthest from them
            self._design.remember_only(latent_points(self._drawn, warps))
        if replacing(self._design, self._budget, self.failures, self.replaced):
            unit = replacement(self._design, index, self._drawn, self._failed, warps)
            self.replaced += 1
        else:
            unit = self._design.draw()
        if warps is not None:
            latent = unit[columns].copy()
            # the columns the loss warp leaves alone all map through the design's
            # marginal (one array, `warp`'s): one `interp` for them, the same values as
            # one call each (issue 46's seventh round: 12 calls a draw before)
            marginal = self._marginal()
            plain = [cdf is marginal for cdf, _ in warps]
            at = columns[plain]
            unit[at] = np.interp(unit[at], marginal, UNIT_GRID)
            for column, (cdf, grid), done in zip(columns, warps, plain, strict=True):
                if not done:
                    unit[column] = float(np.interp(unit[column], cdf, grid))
            if self.contrast is not None:
                sharpen(unit, latent, self._columns, self._hard, self.edge, self.contrast)
            # (`_hard` holds a density exactly for the parameters the loss bends)
            if self.bent is not None and any(h is not None for h in self._hard):
                self.bent += 1
        if self._loss_warped():
            self.warped += 1
        self._drawn.append(unit[columns].tolist())  # (float64 -> float: the same values)
        if self.candidates > 1:
            self._design.remember(unit)
        return self._scale(unit)

    def _options(self) -> dict[str, Any]:
        names = ("share", "quantile", "bandwidth", "min_observations", "tilt", "candidates",
                 "evidence", "edge", "contrast")  # fmt: skip
        return {name: getattr(self, name) for name in names}
