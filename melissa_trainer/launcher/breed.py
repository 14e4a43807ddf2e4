"""`BreedSampler`, Melissa's "Breed": the adaptive sampler the library implements (the
protocol, `AdaptiveSampler`, is `melissa_trainer.launcher.adaptive`'s)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.common.migrations import upgrade
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.breed_exploration import ExplorationDraws, default_changed
from melissa_trainer.launcher.breeding import bred_child, parent_weights
from melissa_trainer.launcher.exploration import Exploration
from melissa_trainer.launcher.explorers import candidates_for, engine_for
from melissa_trainer.launcher.failed_zones import (
    REACH,
    RISK,
    FailedZones,
    with_zone_defaults,
)
from melissa_trainer.launcher.sampler_base import Bounds, bounded_number, decay_draws_for
from melissa_trainer.launcher.sampler_options import checked_min_observations, checked_sigma

__all__ = ["BreedSampler"]


class BreedSampler(AdaptiveSampler):
    """Melissa's "Breed" (arXiv 2410.05860): new simulations bred from the ones where the
    surrogate does worst, mixed with fresh quasi-random draws.

    Draw `i` is, with its generator ``[seed, i]``:

    - an **exploration** draw, with probability `exploration_share(i)` (and always while
      fewer than `min_observations` are kept), by the `explorer`. "sobol" (or
      "halton"): of the next `candidates` points of a scrambled Sobol' (Halton)
      sequence seeded with `seed`, the one farthest from every point drawn so far, bred
      or explored (**gap-filling**, see `exploration.Exploration`: it fills the holes
      the bred draws, clustered around their parents, leave; ``candidates=1``: the next
      point of the sequence). "lhs": the points of a Latin hypercube of the planned
      draws, optimised for its centred discrepancy, in its order (``candidates=K``:
      gap-filling among its first K unused points). "auto" (the default): "sobol" with
      up to 3 varying parameters, "lhs" above;
    - else a **bred** draw: a parent chosen among the last `window` observations with
      probability `parent_weights()`, moved by Gaussian noise in the unit cube (std
      `sigma` in each coordinate), and *reflected* at the bounds there (a point `d`
      past a bound lands `d` inside it): clipping would pile draws onto the bounds,
      reflecting keeps them spread like the noise. In a parameter's own units: a
      linear one ``(low, high)`` moves by ``N(0, sigma * (high - low))``; a log-scale
      one ``(low, high, "log")`` moves in its log, by ``N(0, sigma * ln(high / low))``,
      so a child is its parent *times* a log-normal factor (the default 0.15 over
      three decades: one std is a factor ``exp(0.15 ln 1000)``, about 2.8, whatever
      the parent's value), and a distance `d` past a bound is a ratio, reflected as
      one (a child ``low / r`` lands at ``low * r``). A fixed parameter (low == high)
      does not move.

    Parent weights: with `L` the kept losses, ``z = (L - min L) / (max L - min L)``
    (0 when they are all equal) and ``w = (z + floor) ** power``: the worst parent
    weighs ``((1 + floor) / floor) ** power`` times the best one, whatever the losses'
    scale or offset (the losses fall as the model trains), and the best one keeps a
    share. `floor` large tends to uniform parents, `power` large to the worst only.

    A simulation given up (`failed`) with the "lhs" explorer: once the planned design's
    points are all explored, each exploration draw due as a replacement is a point
    whose nearest draw (drawn, remembered or given up) was not given up
    (`Exploration.away_from`, as `DensitySampler`'s; `launcher.density_replace` says
    why), not a point of a second optimised design. A bred draw is no replacement; with
    a sequence explorer the sequence's next point is (nothing kept).
    Whatever the explorer, a simulation given up is a **no-go zone** of every later
    draw and no parent (`failed`): its observation is dropped, and no draw, bred or
    explored, lands in its zone (`launcher.failed_zones`: within `avoid` of it, nearer
    to it than to every success, or at a risk over `risk` within `reach` `avoid` of it;
    the surrogate sampler's code).

    The exploration share is `exploration`, or decays linearly from `exploration` (draw
    0) to `exploration_final` (draw `decay_draws` and after). `decay_draws=None` takes
    the number of draws `plan` announces (the launcher's `n_simulations`).

    **The default explores only** (`exploration` 1.0: no bred draw, the losses are kept
    but steer nothing), with the explorer "auto": with up to 3 varying parameters the
    gap-filling Sobol' sequence (16 candidates), above them the optimised Latin
    hypercube of the study's size in its order (the benchmark's "LHS, optimised" arm's
    design). On the evaluation seeds of `benchmarks/active_sampling.py` (10 seeds never
    used to choose anything; docs/measured.md, "Active sampling") with 3 parameters it
    erred less than a plain Latin hypercube and than an optimised one, on a uniform test
    set and more so in the hard region; with 6 it ties the optimised Latin hypercube (the
    same draws) and erred less than a plain one and than scrambled Sobol'. Set
    `exploration` below 1 to breed (0.7 with sigma 0.15, floor 0.5, min_observations 8
    were its tuned settings): on that benchmark breeding part of the draws erred more
    than exploring alone.

    Args:
        bounds: `{name: (low, high)}`.
        seed: the seed of the draws and of the exploration sequence.
        exploration: the share of exploration draws, in [0, 1].
        exploration_final: None (a fixed share) or the share reached at `decay_draws`.
        decay_draws: the draws over which the share goes to `exploration_final`.
        window: how many observations are kept as candidate parents (the newest);
            None: all (the state then grows with the study).
        min_observations: every draw explores until this many are kept (<= `window`).
        sigma: the noise's std, as a fraction of each parameter's range in the
            coordinate it is drawn in, in (0, 1]: of ``high - low`` for a linear parameter,
            of ``ln(high / low)`` for a log-scale one (a multiplicative step: above).
        power: the exponent of the parent weights (> 0).
        floor: the weight offset of the best parent (> 0), see above.
        explorer: "auto" (above), "sobol" or "halton" (the sequence), or "lhs" (the
            optimised Latin hypercube of the planned draws: a study exploring it cannot
            change its number of simulations on resume).
        candidates: K, the points each exploration draw chooses among (a sequence's:
            K - 1 of them are skipped); 1: no gap-filling. None: 16 for a sequence, 1
            for "lhs" (on the tuning seeds the gap-filling order of the same design
            erred more: it streams the design's outermost points first).
        memory: how many draws (the newest) gap-filling keeps away from; None: all (the
            state then grows with the study). 1000: every draw of a study of that size,
            with a bounded state (1000 x the varying parameters floats) and cost (K x
            1000 distances per exploration draw).
        avoid: the no-go radius of the draws around each simulation given up
            (`failed`), in the unit cube over the varying parameters (in [0, sqrt(v)]
            for v varying, the cube's diagonal; default 0.1, as the surrogate's).
        risk: the most failure risk a draw near a failure may take, in (0, 0.5] (0.5: off).
        reach: near: within `reach` `avoid` of it (>= 0; `launcher.failed_zones`).
    """

    kind = "breed"

    def __init__(
        self,
        bounds: Bounds,
        seed: int = 0,
        *,
        exploration: float = 1.0,
        exploration_final: float | None = None,
        decay_draws: int | None = None,
        window: int | None = 100,
        min_observations: int = 8,
        sigma: float = 0.15,
        power: float = 1.0,
        floor: float = 0.5,
        explorer: str = "auto",
        candidates: int | None = None,
        memory: int | None = 1000,
        avoid: float = 0.1,
        risk: float = RISK,
        reach: float = REACH,
    ) -> None:
        super().__init__(bounds, seed, window)
        self.exploration = bounded_number("exploration", exploration, 0.0, 1.0)
        final = exploration_final
        final = None if final is None else bounded_number("exploration_final", final, 0.0, 1.0)
        self.exploration_final = final
        self.decay_draws = decay_draws_for(final, decay_draws, self.exploration)
        self.min_observations = checked_min_observations("breed", min_observations, window)
        self.sigma = bounded_number("sigma", sigma, 0.0, math.inf, low_open=True)
        checked_sigma(self.sigma)
        self.power = bounded_number("power", power, 0.0, math.inf, low_open=True)
        self.floor = bounded_number("floor", floor, 0.0, math.inf, low_open=True)
        self.explorer, self.memory = explorer, memory
        #: the explorer's engine: `explorer`, or the one "auto" picks for this box
        self.engine = engine_for(explorer, int((self._span > 0).sum()))
        #: the candidates each exploration draw chooses among: `candidates`, or (None)
        #: 16 for a sequence and 1 for "lhs"
        self.candidates = candidates_for(self.engine, candidates)
        self._candidates_named = candidates is not None
        #: the exploration draws and their replacements (`breed_exploration`)
        self._draws = ExplorationDraws(self._new_exploration())  # checks candidates, memory
        #: the simulation id the last draw was bred from; None for an exploration draw
        self.last_parent: int | None = None
        self.avoid = self._unit_distance("avoid", avoid)
        zones = FailedZones(int((self._span > 0).sum()), self.avoid, risk, reach)  # checks
        self._zones: FailedZones = zones  # the simulations given up, no-go zones (`failed`)
        self.risk, self.reach = zones.risk, zones.reach

    @property
    def explored(self) -> int:
        """How many of the draws so far were exploration draws (the replacements
        included)."""
        return self._draws.explored

    @property
    def replaced(self) -> int:
        """How many exploration draws were replacements ("lhs": class docstring)."""
        return self._draws.replaced

    @property
    def design_size(self) -> int | None:
        """The points of the Latin hypercube the exploration draws from ("lhs"; None
        until planned or first drawn), None for a sequence."""
        return self._draws.design_size

    def _new_exploration(self) -> Exploration:
        dims, varying = len(self.names), self._span > 0
        return Exploration(self.engine, dims, self.seed, varying, self.candidates, self.memory)

    def plan(self, n_draws: int) -> None:
        """`decay_draws=None` becomes `n_draws`, and so does an "lhs" exploration's
        design size (before the first draw; the `Launcher` calls it with the study's
        budget, when it is built). Nothing is computed: a resume would replace it
        (`prepare` computes the design, unless a loaded state held it)."""
        if self.position == 0 and n_draws >= 1:
            self._draws.plan(n_draws)
            if self.decay_draws is None:
                self.decay_draws = int(n_draws)

    def prepare(self) -> None:
        """The "lhs" design the next exploration draw takes its point from, computed now
        (`Sampler.prepare`: the `Launcher`'s `start` calls it, so that its optimisation,
        seconds for a few hundred points, is not paid by a draw on the launcher's thread
        under its lock while the trainer trains), unless it is held (a resumed state
        holds it) or the planned budget is all drawn (the next draws are replacements,
        which need none). The draws are the same. A no-op for a sequence explorer."""
        self._draws.prepare()

    def failed(self, simulation_id: int, parameters: Mapping[str, float]) -> None:
        """A simulation given up for good (`Sampler.failed`: its restarts used up; a
        failed attempt that a restart got through is never told). From now on:

        - no child is bred in its no-go zone (`launcher.failed_zones`) (`breeding`); an
          exploration point in one is moved to the point outside every zone farthest
          from every draw, of `EXPLORATION_POOL` uniform ones (the surrogate sampler's
          `AdaptiveSampler._explored_outside`; the same draws while none is inside);
        - it is no parent: its observation is dropped and its later loss reports are
          ignored (also after a resume: its id is in the state). The samples it sent
          before failing were trained on with a high loss, the weight of a parent
          the breeding would have drawn right back into the region where the solver
          fails;
        - with the "lhs" explorer one more replacement is due (class docstring).
        """
        unit = self._unit(parameters)[self._span > 0]
        self._draws.given_up(unit)  # ("lhs": one more replacement due)
        self._zones.add(simulation_id, unit)
        self._forget(simulation_id)  # (its later reports ignored: `observe`)

    @property
    def failures(self) -> tuple[int, ...]:
        """The ids of the simulations given up so far (`failed`), oldest first."""
        return tuple(self._zones.ids)

    def exploration_share(self, index: int) -> float:
        """The probability that draw `index` explores (given `min_observations` kept)."""
        if self.exploration_final is None:
            return self.exploration
        if self.decay_draws is None:
            raise ValueError(
                "BreedSampler(exploration_final=...) needs decay_draws=, or a Launcher "
                "to plan it (its n_simulations)"
            )
        progress = min(index, self.decay_draws) / self.decay_draws
        return self.exploration + (self.exploration_final - self.exploration) * progress

    def parent_weights(self) -> np.ndarray:
        """Each kept observation's probability of being the next parent (oldest first)."""
        losses = np.array([o.loss for o in self._observed.values()], dtype=np.float64)
        return parent_weights(losses, self.floor, self.power)

    def _propose(self, index: int) -> dict[str, float]:
        rng = self._rng(index)
        explore = rng.random() < self.exploration_share(index)  # drawn first, always
        if explore or len(self._observed) < self.min_observations:
            self.last_parent = None
            draws = self._draws  # (out of the failures' zones, as the surrogate's)
            drawn = draws.drawn()  # (before this draw: the keep-away set excludes it)
            unit = self._explored_outside(draws.draw(index), rng, EXPLORATION_POOL, drawn)
        else:
            parents = list(self._observed.values())
            parent = parents[int(rng.choice(len(parents), p=self.parent_weights()))]
            varying, known = self._span > 0, self._known  # (out of the failures' zones)
            unit = bred_child(
                self._unit(parent.parameters), rng, self.sigma, self._zones, known, varying
            )
            self.last_parent = parent.simulation_id
        self._draws.remember(unit)  # every draw: gap-filling keeps away from all of them
        return self._scale(unit)

    def _options(self) -> dict[str, Any]:
        names = ("exploration", "exploration_final", "min_observations", "sigma", "power",
                 "floor", "explorer", "candidates", "memory", "avoid", "risk", "reach")  # fmt: skip
        options = {name: getattr(self, name) for name in names}
        # the engine, not "auto": the state says which draws it holds, so that a state
        # saved with explorer "sobol" (the default before "auto") resumes in a box where
        # "auto" explores with the same Sobol' sequence
        options["explorer"] = self.engine
        return options

    def _differs(self, key: str, saved: Any) -> str:
        varying = int((self._span > 0).sum())  # (a default that changed: `breed_exploration`)
        return default_changed(
            key, saved, self.explorer, self.engine, self._candidates_named, varying
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "decay_draws": self.decay_draws,
            **self._draws.state_dict(),  # (its replacements' none without failures)
            # (none without failures, as the replacements')
            **({"zones": self._zones.state_dict()} if len(self._zones) else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Also a state saved before gap-filling, with ``candidates=1`` (see
        `common.migrations`, "breed_sampler"), and one saved before the no-go zones
        (`failed`; without `avoid`): it resumes with none, its failures were not told
        with their ids (a given-up simulation's observation kept then stays); one
        without `risk`, `reach`: the values then (`failed_zones.with_zone_defaults`)."""
        state = upgrade("breed_sampler", state, candidates=self.candidates, memory=self.memory)
        state = with_zone_defaults({"avoid": self.avoid, **state})
        self._refuse_other(state)  # first: its messages name the option that differs
        saved = state.get("decay_draws")
        # (a fixed share, exploration_final None, does not use it: the saved one is kept)
        differs = self.decay_draws is not None and saved is not None and saved != self.decay_draws
        if differs and self.exploration_final is not None:
            raise ValueError(
                f"sampler state has decay_draws={saved} but this sampler has {self.decay_draws}"
            )
        dims = int((self._span > 0).sum())
        draws = self._draws.loaded(state, self._new_exploration(), dims)  # (checked first)
        zones = FailedZones(self._zones.dims, self.avoid, self.risk, self.reach)
        zones.load_state_dict(state.get("zones", []), "zones")
        super().load_state_dict(state)
        self._draws, self._zones = draws, zones
        if saved is not None:
            self.decay_draws = int(saved)
        self.last_parent = None


#: the uniform points an exploration draw in a no-go zone is moved to the best of
#: (`AdaptiveSampler._explored_outside`; the surrogate sampler's default `pool`)
EXPLORATION_POOL = 1024
