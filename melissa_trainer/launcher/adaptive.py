"""Adaptive samplers: the next parameters depend on how badly the surrogate does where
the earlier simulations ran (a `Study` feeds them each simulation's training loss, see
`melissa_trainer.core.loss_per_simulation`).

`AdaptiveSampler` is the protocol (its docstring is the guide to writing your own);
`melissa_trainer.launcher.breed.BreedSampler` the one implemented.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from melissa_trainer.common.checks import check_non_negative_int, check_positive_int
from melissa_trainer.launcher.exploration import nearest_gaps
from melissa_trainer.launcher.failed_zones import FailedZones
from melissa_trainer.launcher.sampler_base import Bounds, BoxSampler, parameter_values

__all__ = ["AdaptiveSampler", "Observation"]

#: the types a loss may have (a bool is refused apart)
_NUMBERS = (int, float, np.integer, np.floating)


@dataclass(frozen=True)
class Observation:
    """One simulation's parameters and its loss statistic (higher: the surrogate is worse)."""

    simulation_id: int
    parameters: dict[str, float]
    loss: float


class AdaptiveSampler(BoxSampler):
    """A sampler of the box `bounds` steered by `observe`. To write your own, subclass
    it and implement ``_propose(index)``:

    - ``observe(simulation_id, parameters, loss)`` tells it how a simulation went (a `Study`
      calls it through `Launcher.observe`): the parameters it ran with and a finite statistic
      of the training loss on its samples (higher: the surrogate is worse there). It is
      validated (finite loss, exactly the sampler's names, inside the bounds, else a
      `ValueError`) and kept in `observations`, oldest first, the last `window` of them.
      Observing a simulation again replaces its observation and makes it the newest.
    - ``draw()`` calls ``_propose(index)`` for draw number `index` (0, 1, 2 ...) when the
      launcher launches a simulation, or a worker asks for its next one. The proposal must
      map exactly `names` to finite values inside the bounds (checked; ``_scale`` maps a
      point of the unit cube to the box, ``_unit`` the other way).
    - **Deterministic**: draw `index` depends only on the seed, `index`, the observations
      made before it and the sampler's own state. Take randomness from ``_rng(index)`` (a
      generator seeded with ``[seed, index]``), never from a global generator.
    - **Resumable**: `state_dict()` holds the position and the observations; a subclass
      with more state (counters, an engine's position) adds it to `state_dict` and restores
      it in `load_state_dict`, so that a sampler built with the same arguments that loads
      the state continues the same sequence.
    - **Not thread-safe**: the launcher calls `draw` under its lock, and `observe` must be
      called under the same lock.

    Bounds whose every parameter is fixed (low == high) are accepted, as by every
    sampler: every draw is the one fixed point (a study that repeats one configuration),
    `observe` and `failed` record as usual (no error: a failure there bans a point that
    every draw is, and the draw stays it, as a sampler's draw must be inside the
    bounds), and the options measured in the unit cube (`avoid`, `spacing`) have no
    effect: nothing adapts (a study says so when it starts, `launcher.sampler_account`).

    Set a `kind` (stored in the state: a state of another kind is refused). For example,
    half the draws near the worst simulation kept, half uniform:

    ```python
    class WorstFirst(AdaptiveSampler):
        kind = "worst-first"

        def _propose(self, index: int) -> dict[str, float]:
            rng = self._rng(index)
            if not self.observations or rng.random() < 0.5:
                return self._scale(rng.random(len(self.names)))
            worst = max(self.observations, key=lambda o: o.loss)
            unit = self._unit(worst.parameters) + rng.normal(0.0, 0.05, len(self.names))
            return self._scale(np.clip(unit, 0.0, 1.0))

    sampler = WorstFirst({"t0": (100.0, 500.0)}, seed=0, window=50)
    ```

    Args:
        bounds: `{name: (low, high)}`.
        seed: the seed of every draw's generator (``[seed, index]``).
        window: how many observations are kept (the newest); None: all of them.
    """

    def __init__(self, bounds: Bounds, seed: int = 0, window: int | None = None) -> None:
        super().__init__(bounds, seed)
        if window is not None:
            check_positive_int("window", window)
        self.window = window
        # The observations kept, as two dicts rather than `Observation`s: a study
        # re-observes every simulation kept before each draw (tens a draw), and making
        # an `Observation` was most of a re-observation's CPU (issue 46's ninth round);
        # they are made when read (`_observed`), once per change at most.
        #: simulation id -> its newest loss, oldest observation first (the order of
        #: `observations`)
        self._losses: dict[int, float] = {}
        #: simulation id -> the parameters it was observed with (checked; the same ids)
        self._parameters: dict[int, dict[str, float]] = {}
        self._view: OrderedDict[int, Observation] | None = None
        #: the simulations given up and their no-go zones, in a sampler that learns from
        #: failures (its `failed` sets it and calls `_forget`; None: one that does not):
        #: their later reports are not observed (`observe`)
        self._zones: FailedZones | None = None
        #: how many times the observations kept changed (a new one, a re-observation, a
        #: loaded state): what a subclass computes from them alone is valid while it stays
        self._changes = 0
        #: how many observations were kept at the latest draw (None before the first):
        #: a study that drew everything before it held enough of them adapted none of
        #: its draws (`melissa_trainer.study.feedback`). In the state: a resumed study's
        #: account judges the draws made before its resume too
        self.observed_at_draw: int | None = None
        #: how many draws were made holding at least `min_losses` observations (the
        #: draws the losses could steer; the others explored, as a fixed design would);
        #: in the state. None: unknown (resumed from a state saved before it was counted)
        self.adaptive_draws: int | None = 0

    @property
    def _observed(self) -> OrderedDict[int, Observation]:
        """The observations kept by simulation id, oldest first (read-only: made from
        `_losses` and `_parameters` when read after a change)."""
        view = self._view
        if view is None:
            parameters = self._parameters
            view = self._view = OrderedDict(
                (sid, Observation(sid, parameters[sid], loss)) for sid, loss in self._losses.items()
            )
        return view

    def _forget(self, simulation_id: int) -> None:
        """Drop `simulation_id`'s observation, if kept (a simulation given up: the loss
        of the samples it sent before it failed, the start of a run, would steer the
        draws right back at the region where the solver fails)."""
        if simulation_id in self._losses:
            del self._losses[simulation_id], self._parameters[simulation_id]
            self._view = None
            self._changes += 1

    def _known(self) -> np.ndarray:
        """The points observed (rows over the varying parameters of the unit cube): what
        the no-go zones' nearest-point rule weighs a failure against. Not the draws
        still running: a draw is no evidence that a point does not fail until its
        samples come in (the draws next to a failure would otherwise wear its zone away)."""
        varying = self._span > 0
        kept = [self._unit(p)[varying] for p in self._parameters.values()]
        # (len(kept), not -1: with every parameter fixed the rows are empty, and numpy
        # cannot infer a row count from size 0)
        return np.reshape(np.asarray(kept, dtype=np.float64), (len(kept), int(varying.sum())))

    def _explored_outside(
        self, unit: np.ndarray, rng: np.random.Generator, pool: int, drawn: np.ndarray
    ) -> np.ndarray:
        """Exploration point `unit` (the whole unit cube), or, when it lies in a no-go
        zone (`_zones`), of `pool` uniform points drawn from `rng` the one outside every
        zone farthest from every row of `drawn` (the draws to keep away from, over the
        varying parameters); when all are inside, the one farthest from every failure
        (`FailedZones.choose`). Without zones, or with `unit` outside them, `unit`
        itself and `rng` untouched: the draws are the same as without failures."""
        zones = self._zones
        if zones is None or not len(zones):
            return unit
        varying = self._span > 0
        known = self._known()
        if zones.allowed(unit[None, varying], known)[0]:
            return unit
        points = np.zeros((pool, len(self.names)))
        points[:, varying] = rng.random((pool, int(varying.sum())))
        gaps = nearest_gaps(points[:, varying], drawn)
        out: np.ndarray = points[zones.choose(points[:, varying], gaps, known)]
        return out

    @property
    def observations(self) -> tuple[Observation, ...]:
        """The observations kept, oldest first (at most `window`)."""
        return tuple(self._observed.values())

    def observe(self, simulation_id: int, parameters: Mapping[str, float], loss: float) -> None:
        """Record a simulation's loss statistic (not thread-safe: under the launcher's lock).

        A simulation given up (in `_zones`) is not observed: its reports of samples
        trained before it failed are ignored.

        Raises:
            ValueError: a negative or non-int id, parameters with other names, non-finite
                or outside the bounds, a non-finite loss, or other parameters than those
                this simulation was observed with before.
        """
        zones = self._zones
        if zones is not None and simulation_id in zones:
            return
        earlier = self._parameters.get(simulation_id) if type(simulation_id) is int else None
        if (
            earlier is not None
            and type(loss) is float
            and math.isfinite(loss)
            and parameters == earlier
        ):
            # a study's usual call: a simulation kept, reported again with its parameters
            # and a new float loss; every check `_observation` makes passed when it was
            # first observed (issue 46's seventh round: half the CPU of an observation),
            # and its `Observation` is made when read (the ninth round)
            losses = self._losses
            del losses[simulation_id]  # the newest again
            losses[simulation_id] = loss
            self._view = None
            self._changes += 1
            return
        self._observed_add(self._observation(simulation_id, parameters, loss, earlier))

    def _observation(
        self,
        simulation_id: Any,
        parameters: Any,
        loss: Any,
        earlier: dict[str, float] | None = None,
    ) -> Observation:
        """The checked observation; `earlier` (the parameters kept of this simulation,
        if any): parameters equal to them are them, checked when they were first
        observed (a study reports each simulation every few steps with the same
        parameters: issue 46, the checks were most of the sampler's CPU)."""
        check_non_negative_int("simulation_id", simulation_id, numpy=True)
        if earlier is not None and parameters == earlier:
            values = earlier
        else:
            values = self._inside(
                parameters, f"the parameters observed for simulation {simulation_id}"
            )
        if isinstance(loss, bool) or not isinstance(loss, _NUMBERS):
            raise ValueError(f"the loss of simulation {simulation_id} is not a number: {loss!r}")
        if not math.isfinite(float(loss)):
            raise ValueError(
                f"the loss of simulation {simulation_id} is {float(loss)}: only finite losses "
                f"can steer the sampler (leave a diverged simulation unobserved)"
            )
        return Observation(int(simulation_id), values, float(loss))

    def _observed_add(self, observation: Observation) -> None:
        sid = observation.simulation_id
        earlier = self._parameters.get(sid)
        if earlier is not None and earlier != observation.parameters:
            raise ValueError(
                f"simulation {sid} was observed with {earlier}, now with "
                f"{observation.parameters}: one simulation runs with one parameter set"
            )
        losses, parameters = self._losses, self._parameters
        losses.pop(sid, None)  # re-observed: the newest again
        losses[sid] = observation.loss
        parameters[sid] = observation.parameters
        while self.window is not None and len(losses) > self.window:
            oldest = next(iter(losses))
            del losses[oldest], parameters[oldest]
        self._view = None
        self._changes += 1

    @property
    def min_losses(self) -> int:
        """The observations a draw needs to adapt: `min_observations` where the sampler
        has one, else 1."""
        least = getattr(self, "min_observations", 1)
        return least if isinstance(least, int) else 1

    def _draw(self, index: int) -> dict[str, float]:
        held = len(self._losses)
        proposed = self._inside(self._propose(index), f"{type(self).__name__}._propose({index})")
        self.observed_at_draw = held
        if self.adaptive_draws is not None and held >= self.min_losses:
            self.adaptive_draws += 1
        return proposed

    def _inside(self, parameters: Any, what: str) -> dict[str, float]:
        """`parameters` as `{name: float}` in `names` order, checked against the bounds."""
        values = parameter_values(self.names, parameters, what)
        for name, value in values.items():
            low, high = self.bounds[name]
            if not low <= value <= high:
                raise ValueError(f"{what}: {name}={value} is outside its bounds [{low}, {high}]")
        return values

    @abstractmethod
    def _propose(self, index: int) -> dict[str, float]:
        """The parameters of draw number `index` (see the module docstring)."""

    def _rng(self, index: int) -> np.random.Generator:
        """Draw `index`'s generator, seeded with ``[seed, index]``."""
        return np.random.default_rng([self.seed, index])

    def _options(self) -> dict[str, Any]:
        """The arguments a state must have been saved with (in the state, checked on load)."""
        return {}

    def _refuse_other(self, state: Mapping[str, Any]) -> None:
        """Raise a ValueError if `state` is of another kind, names, seed, window or options."""
        # the kind first: a state of another sampler is refused as such
        mine = {"kind": self.kind, "names": list(self.names), "seed": self.seed}
        for key, value in {**mine, "window": self.window, **self._options()}.items():
            if state.get(key) != value:
                raise ValueError(
                    f"sampler state has {key}={state.get(key)!r} but this sampler has "
                    f"{key}={value!r}{self._differs(key, state.get(key))}: build the "
                    f"sampler with the arguments of the saved run"
                )

    def _differs(self, key: str, saved: Any) -> str:
        """What `_refuse_other`'s message adds when option `key` differs from the
        state's `saved` (a subclass's explanation; nothing by default)."""
        return ""

    def state_dict(self) -> dict[str, Any]:
        parameters = self._parameters
        observations = [
            {"simulation_id": sid, "parameters": dict(parameters[sid]), "loss": loss}
            for sid, loss in self._losses.items()
        ]
        return {
            **super().state_dict(),
            "window": self.window,
            **self._options(),
            "observations": observations,
            "observed_at_draw": self.observed_at_draw,
            "adaptive_draws": self.adaptive_draws,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a `state_dict()` (the observations included). A state saved
        before `observed_at_draw` and `adaptive_draws` were in it loads with both
        unknown (None; `adaptive_draws` 0 before any draw): the study's account then
        judges what it can (`melissa_trainer.study.feedback`).

        Raises:
            ValueError: a state of another kind, names, seed or window, or a malformed
                observation or count.
        """
        self._refuse_other(state)
        at_draw, adaptive = _draw_counts(state)
        saved = state.get("observations")
        if not isinstance(saved, list):
            raise ValueError(f"sampler state has no list of observations: {saved!r}")
        observed: OrderedDict[int, Observation] = OrderedDict()
        for item in saved:
            if not isinstance(item, Mapping):
                raise ValueError(f"sampler state has a malformed observation {item!r}")
            sid, parameters, loss = (item.get(k) for k in ("simulation_id", "parameters", "loss"))
            observation = self._observation(sid, parameters, loss)
            observed[observation.simulation_id] = observation
        if self.window is not None and len(observed) > self.window:
            raise ValueError(f"sampler state has {len(observed)} observations, over the window")
        super().load_state_dict(state)
        self._losses = {sid: o.loss for sid, o in observed.items()}
        self._parameters = {sid: o.parameters for sid, o in observed.items()}
        self._view = None
        self._changes += 1
        self.observed_at_draw, self.adaptive_draws = at_draw, adaptive


def _draw_counts(state: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """A state's `observed_at_draw` and `adaptive_draws`, checked (at most its position
    adaptive draws); unknown (None) when absent, but no adaptive draw before any draw.

    Raises:
        ValueError: a count that is not None or a non-negative int, or more adaptive
            draws than draws.
    """
    position = state.get("position")
    drawn = position if isinstance(position, int) and not isinstance(position, bool) else 0
    at_draw = state.get("observed_at_draw")
    adaptive = state.get("adaptive_draws", None if drawn else 0)
    for name, value in (("observed_at_draw", at_draw), ("adaptive_draws", adaptive)):
        invalid = isinstance(value, bool) or not isinstance(value, int) or value < 0
        if value is not None and invalid:
            raise ValueError(f"sampler state has an invalid {name} {value!r}")
    if adaptive is not None and adaptive > drawn:
        raise ValueError(f"sampler state has {adaptive} adaptive draws of {drawn} draws")
    return at_draw, adaptive
