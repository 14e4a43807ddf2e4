"""`SurrogateSampler`: an acquisition steered by what the surrogate itself says, for
parameter spaces of many dimensions (issue 46).

Breed (`launcher.breed`) breeds near the simulations trained worst: in 6 dimensions
and more its Gaussian moves around a few parents cover little, and on the benchmark
breeding did not pay over its own exploration. This sampler instead fits a **loss
predictor** to the losses the trainer already tracks (each simulation's relative
training loss, `melissa_trainer.core.loss_per_simulation`, fed by the `Study` through
`observe`) and draws where it predicts the surrogate does worst, or knows least:

- a Gaussian-process regression (squared-exponential kernel over the varying
  parameters in the unit cube, one length scale: the median distance between the
  observed points, times `length`) of the log loss (the loss itself when one is <= 0),
  standardised, with the noise variance `noise`. The trend of the loss with the
  simulation's id (its launch order) is fitted by least squares and removed first: a
  simulation launched late has been trained on less and its loss is higher wherever it
  ran (the relative loss compares it with the data trained on at the same time, not
  with the data trained on as often), which would otherwise read as a region to
  sample;
- an **acquisition draw** scores `pool` uniform candidates (the draw's own generator)
  by the predicted mean plus `kappa` times the predicted standard deviation (an upper
  confidence bound) and takes the best. The deviation is that of a process conditioned
  on *every* point drawn so far, those still running (not observed yet) included: a
  launched simulation is no longer unknown (the "kriging believer" for the variance).
  That lowers the score next to a running draw by at most `kappa` times about 0.7 of a
  deviation (noise 0.1: a known point keeps sqrt(0.1/1.1) of it), which a high
  predicted loss can outweigh: consecutive draws then do pile onto one spot, a
  boundary corner above all, until their losses come in. `spacing` (default 0.1)
  forbids it: an acquisition keeps that distance from every draw remembered, or once
  no candidate outside the failures' zones can (the space filling up), half the largest
  gap one reaches (`launcher.acquisition_spacing`, user trial 31). It was 0 until an
  A/B on the worst cases (`benchmarks/surrogate_spacing_ab.py`, docs/measured.md) and
  the failing boundary's (fewer failures, more coverage) preferred 0.1;
- the simulations given up (`failed`) are **no-go zones**: no draw lands within `avoid`
  of one, nearer to one than to every success observed, or at a failure risk over
  `risk` (1/4) within `reach` (3) `avoid` of one (`launcher.failed_zones`), and their
  losses (of the samples trained before they failed) are dropped;
- with probability `exploration` (and while fewer than `min_observations` are kept) an
  **exploration draw** instead, the gap-filling scrambled Sobol' sequence of
  `exploration.Exploration` (16 candidates: the sequence's point farthest from every
  draw so far, acquired or explored): the share that keeps the whole space covered,
  which the mean error needs (the OGAS trade-off: tails for a slightly worse mean).

The fit costs O(w^3) for `window` w observations and the scores O(`pool` x (w +
`memory`)) per acquisition draw, on the launcher's thread under its lock: 0.17-2.3 s
of CPU per 48-simulation study in all, draws and observations, in the runs below (their
``sampler_seconds``); `benchmarks/surrogate_cost.py` measures the trainer's step rate
with it on and off.

Measured on the heat benchmark (`benchmarks/active_sampling.py --ours surrogate
--steps 4000`, evaluation seeds 1000-1009, 48 simulations; the raw runs
``benchmarks/results/active_sampling_surrogate_{walls,full,wide}.jsonl``,
docs/measured.md, "Issue 46"), medians of the per-seed ratios baseline / surrogate
(above 1: the surrogate errs less): with 3 parameters (walls) against a plain Latin
hypercube 1.61 on the mean, 2.65 on the p99 and 3.26 on the worst held-out simulation
(8, 10 and 10 seeds of 10); against the optimised Latin hypercube, with 6 parameters
0.69 on the mean (2 of 10), 0.86 on the p99 and 0.85 on the worst (4 of 10 each, the
bootstrap intervals across 1), 1.80 inside the high-loss region; with 12 0.62, 0.66,
0.64 (0, 2 and 1 of 10). Not tuned (its defaults were fixed before any run). On
another problem it loses at 3 parameters too: a 1-D Burgers study whose loss is highest
where the judged relative error is not (`benchmarks/sampler_worst_case_burgers.py`,
seeds 100-105, 40 simulations, plain "lhs" the baseline of the same run;
``benchmarks/results/sampler_worst_case_burgers_2026-12-01.jsonl``): lhs / surrogate
0.87 on the worst held-out case (0 seeds of 6 better), 0.89 on the mean; 1.01 on the
worst with ``exploration=0.8`` (docs/concepts/study.md, "When the surrogate acquisition
loses"). Its cost on a small MLP's steps per CPU-second of the step and the sampler:
1.012 on / off, the medians of 5 pairs (the median of the per-pair ratios 0.972;
`benchmarks/surrogate_cost.py --pairs 5 --steps 2000`, a busy machine, 2026-11-30:
``benchmarks/results/surrogate_cost_gp_2026-11-30.txt``).

Deterministic (draw `i` depends on the seed, `i`, the observations made before it and
the draws so far) and resumable: the state holds the observations, the exploration's
state (the points drawn), the simulations given up and how the predictor's deviation
solves (`loss_predictor`: a state saved before it did resumes as it drew). Not
thread-safe (the launcher's lock).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.launcher.acquisition_spacing import kept_spacing, say_shrunk
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.exploration import Exploration
from melissa_trainer.launcher.explorers import GAP_CANDIDATES
from melissa_trainer.launcher.failed_zones import (
    REACH,
    RISK,
    FailedZones,
    with_zone_defaults,
)
from melissa_trainer.launcher.loss_predictor import STD_SOLVES, LossPredictor
from melissa_trainer.launcher.sampler_base import Bounds, bounded_number
from melissa_trainer.launcher.sampler_options import checked_min_observations, checked_pool

__all__ = ["SurrogateSampler"]


class SurrogateSampler(AdaptiveSampler):
    """Draws where a loss predictor fitted on the observed losses says the surrogate
    does worst or knows least, with a share of gap-filling exploration (module
    docstring).

    Args:
        bounds: `{name: (low, high)}`.
        seed: the seed of the draws and of the exploration sequence.
        exploration: the share of exploration draws, in [0, 1] (default 0.5).
        window: how many observations the predictor is fitted on (the newest); None:
            all (the fit then costs O(n^3) in the study's size).
        min_observations: every draw explores until this many are kept, from 3 (below,
            the predictor is flat: `launcher.sampler_options`) to `window`.
        pool: the uniform candidates each acquisition draw scores (>= 2; default 1024).
        kappa: the weight of the predicted deviation in the score (>= 0; 0: the
            predicted loss alone).
        noise: the predictor's noise variance, of the standardised log loss (> 0).
        length: the kernel's length scale, in median distances between observed
            points (> 0).
        memory: how many draws (the newest) the exploration keeps away from and the
            deviation is conditioned on; None: all.
        avoid: the no-go radius around each simulation given up (`failed`), in the
            unit cube over the varying parameters (in [0, sqrt(v)] for v varying, the
            cube's diagonal; default 0.1; see `failed`).
        spacing: the least distance (same unit and range) from an acquisition draw to
            every draw remembered, running or observed (default 0.1; 0: none, the
            deviation alone spreads the draws, which a high predicted loss at a
            boundary can outweigh: the default before 2026-12-02). Once no candidate
            keeps it (the space filling up), half the largest gap a candidate reaches
            (`launcher.acquisition_spacing`; said once in the log).
        risk: the most failure risk a draw near a simulation given up may take, in
            (0, 0.5] (default 0.25; 0.5: nearer to a success than to every failure is
            enough; `launcher.failed_zones`).
        reach: within how many `avoid` of a simulation given up the `risk` rule holds
            (>= 0; default 3; 0: nowhere).

    Raises:
        ValueError: an option out of range (the message names it).
    """

    kind = "surrogate"

    def __init__(
        self,
        bounds: Bounds,
        seed: int = 0,
        *,
        exploration: float = 0.5,
        window: int | None = 100,
        min_observations: int = 8,
        pool: int = 1024,
        kappa: float = 1.0,
        noise: float = 0.1,
        length: float = 1.0,
        memory: int | None = 1000,
        avoid: float = 0.1,
        spacing: float = 0.1,
        risk: float = RISK,
        reach: float = REACH,
    ) -> None:
        super().__init__(bounds, seed, window)
        self.exploration = bounded_number("exploration", exploration, 0.0, 1.0)
        self.min_observations = checked_min_observations("surrogate", min_observations, window)
        self.pool = checked_pool(pool)
        self.kappa = bounded_number("kappa", kappa, 0.0, math.inf)
        self.noise = bounded_number("noise", noise, 0.0, math.inf, low_open=True)
        self.length = bounded_number("length", length, 0.0, math.inf, low_open=True)
        self.memory = memory
        self.avoid = self._unit_distance("avoid", avoid)
        self.spacing = self._unit_distance("spacing", spacing)
        self._varying = self._span > 0
        #: the simulations given up, the acquisition's no-go zones (`failed`)
        zones = FailedZones(int(self._varying.sum()), self.avoid, risk, reach)  # checks them
        self._zones: FailedZones = zones
        self.risk, self.reach = zones.risk, zones.reach
        self._explorer = self._new_exploration()  # checks memory
        #: acquisition draws made so far (the others explored)
        self.acquired = 0
        #: whether the log said that `spacing` could not be kept (`_acquire`; once per
        #: sampler object: not in the state)
        self._spacing_said = False
        #: how the predictor's deviation solves (`loss_predictor.STD_SOLVES`): a new
        #: study's "triangular"; a resume takes its state's, so that it draws what the
        #: uninterrupted study would have, bit for bit (`load_state_dict`)
        self.std_solve = STD_SOLVES[0]

    def _new_exploration(self) -> Exploration:
        return Exploration(
            "sobol", len(self.names), self.seed, self._varying, GAP_CANDIDATES, self.memory
        )

    @property
    def explored(self) -> int:
        """How many of the draws so far were exploration draws."""
        return self._explorer.explored

    def failed(self, simulation_id: int, parameters: Mapping[str, float]) -> None:
        """A simulation given up for good (`Sampler.failed`: its restarts used up; a
        failed attempt that a restart got through is never told, so a transient failure
        bans nothing). From now on:

        - no draw, acquired or explored, lands in its no-go zone
          (`launcher.failed_zones`): within `avoid` of it, nearer to it than to every
          success observed, or at a risk over `risk` near it. An acquisition takes the
          best-scored candidate outside every zone, an exploration point inside one
          is replaced by the candidate outside them farthest from every draw; when the
          whole pool is banned, the candidate farthest from every failure;
        - its loss no longer steers the predictor: its observation is dropped and later
          ones ignored. The samples it sent before failing were trained on with a high
          loss (the start of a run is what the surrogate knows least), so the predictor
          would aim right back at the region where the solver fails; the zone says
          what is known there instead.
        """
        self._zones.add(simulation_id, self._unit(parameters)[self._varying])
        self._forget(simulation_id)  # (its later reports ignored: `observe`)

    @property
    def failures(self) -> tuple[int, ...]:
        """The ids of the simulations given up so far (`failed`), oldest first."""
        return tuple(self._zones.ids)

    def predictor(self) -> LossPredictor | None:
        """The loss predictor of the observations kept (None below `min_observations`)."""
        if len(self._observed) < self.min_observations:
            return None
        kept = list(self._observed.values())
        points = np.stack([self._unit(o.parameters)[self._varying] for o in kept])
        losses = np.array([o.loss for o in kept], dtype=np.float64)
        known = self._explorer.drawn  # every draw so far (the newest `memory`)
        # the observed ones too: a state loaded from before a draw was remembered, or a
        # simulation observed but drawn by another sampler, is known all the same
        known = np.concatenate([known, points]) if len(known) else points
        ages = np.array([o.simulation_id for o in kept], dtype=np.float64)
        return LossPredictor(
            points, losses, known, self.noise, self.length, ages, std_solve=self.std_solve
        )

    def _propose(self, index: int) -> dict[str, float]:
        rng = self._rng(index)
        explore = rng.random() < self.exploration  # drawn first, always
        predictor = None if explore else self.predictor()
        if predictor is None:
            # not in a failure's zone: of the pool, the allowed one farthest from every draw
            unit = self._explored_outside(
                self._explorer.draw(), rng, self.pool, self._explorer.drawn
            )
        else:
            candidates = rng.random((self.pool, int(self._varying.sum())))
            score = predictor.mean(candidates) + self.kappa * predictor.std(candidates)
            best = self._acquire(candidates, score)
            unit = self._full(candidates[best : best + 1])[0]
            self.acquired += 1
        self._explorer.remember(unit)  # every draw: exploration and deviation know it
        return self._scale(unit)

    def _acquire(self, candidates: np.ndarray, score: np.ndarray) -> int:
        """The index of the acquisition's candidate: the best-scored one outside every
        no-go zone (`failed`) and at least `spacing` from every draw remembered; once no
        candidate outside the zones keeps `spacing` (the space filling up), at least
        what they allow, half the largest gap one reaches (`launcher.acquisition_spacing`,
        said once in the log). When every candidate is in a zone, the one farthest from
        every failure."""
        mask = np.ones(len(candidates), dtype=bool)
        if len(self._zones):
            mask = self._zones.allowed(candidates, self._known())
        if not mask.any():
            return int(np.argmax(self._zones.distance(candidates)))
        if self.spacing > 0 and self._varying.any():  # (none varying: one point, no gap)
            gaps = self._explorer.gaps(self._full(candidates))
            kept = kept_spacing(gaps[mask], self.spacing)
            if kept < self.spacing and not self._spacing_said:
                self._spacing_said = True
                say_shrunk(self.spacing, len(self._explorer.drawn), kept)
            mask &= gaps >= kept
        return int(np.argmax(np.where(mask, score, -np.inf)))

    def _full(self, candidates: np.ndarray) -> np.ndarray:
        """Rows over the varying parameters as points of the whole unit cube (0 fixed)."""
        out = np.zeros((len(candidates), len(self.names)))
        out[:, self._varying] = candidates
        return out

    def _options(self) -> dict[str, Any]:
        names = ("exploration", "min_observations", "pool", "kappa", "noise", "length", "memory")
        # (absent from older states: `load_state_dict`)
        added = {"avoid": self.avoid, "spacing": self.spacing}
        added.update(risk=self.risk, reach=self.reach)
        return {**{name: getattr(self, name) for name in names}, **added}

    def _differs(self, key: str, saved: Any) -> str:
        if key == "spacing" and saved == 0.0:
            return " (0 was the default before 2026-12-02: pass spacing=0.0 to resume it)"
        return ""

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "acquired": self.acquired,
            "exploration_state": self._explorer.state_dict(),
            "failed": self._zones.state_dict(),
            "std_solve": self.std_solve,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a `state_dict()` of a sampler built with the same arguments.

        A state saved before the deviation's solve was kept in it (before 2026-12-05:
        no ``std_solve``) resumes with the general LU solve its draws were made with.

        Raises:
            ValueError: a state of another kind or options, or a malformed part; nothing
                changes then.
        """
        if "avoid" not in state and "failed" not in state:
            # saved before failures were kept (none were then) and spacing existed (the
            # draws had none): the state of a run with the defaults
            state = {**state, "avoid": self.avoid, "failed": [], "spacing": 0.0}
        state = with_zone_defaults(state)  # (saved before `risk` and `reach` were options)
        self._refuse_other(state)
        failed = FailedZones(self._zones.dims, self.avoid, self.risk, self.reach)
        failed.load_state_dict(state.get("failed"))
        acquired, exploration_state = state.get("acquired"), state.get("exploration_state")
        if isinstance(acquired, bool) or not isinstance(acquired, int) or acquired < 0:
            raise ValueError(f"sampler state has an invalid acquired count {acquired!r}")
        if not isinstance(exploration_state, Mapping):
            raise ValueError(f"sampler state has no exploration_state: {exploration_state!r}")
        std_solve = state.get("std_solve", "lu")  # (absent: saved before it was kept)
        if std_solve not in STD_SOLVES:
            raise ValueError(f"sampler state has an unknown std_solve {std_solve!r}")
        explorer = self._new_exploration()
        explorer.load_state_dict(exploration_state)
        if explorer.explored + acquired != state.get("position"):
            raise ValueError(
                f"sampler state has {explorer.explored} explored and {acquired} acquired "
                f"draws, not its position {state.get('position')!r}"
            )
        super().load_state_dict(state)
        self._explorer, self.acquired, self._zones = explorer, acquired, failed
        self.std_solve = std_solve
