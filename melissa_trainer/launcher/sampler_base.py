"""The base of every parameter sampler, and the checks they share.

`Sampler` is the contract (see `launcher.samplers` for the guarantees and the samplers of
a fixed design), `BoxSampler` the base of those that draw in a box of bounds (the
quasi-random ones, and the adaptive ones: `launcher.adaptive`, `launcher.breed`). Kept
apart from `samplers.py` so that both it and `adaptive.py` build on it without importing
each other (`samplers.make_sampler` builds a `BreedSampler`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from melissa_trainer.common.checks import check_non_negative_int, check_positive_int
from melissa_trainer.common.words import plural
from melissa_trainer.launcher.sampler_bounds import check_bounds

__all__ = [
    "BoxSampler",
    "Bounds",
    "Sampler",
    "SamplerExhausted",
    "bounded_number",
    "parameter_values",
    "qmc_engine",
]

#: a box of parameters: name -> (low, high), drawn linearly (as (low, high, "linear"));
#: or (low, high, "log"), drawn log-uniformly (0 < low; the simulation receives the
#: value, not its log). low == high fixes the parameter. Lists are accepted as tuples;
#: what else is refused, and why: `launcher.sampler_bounds`
Bounds = Mapping[str, tuple[float, float] | tuple[float, float, str]]


class SamplerExhausted(LookupError):
    """`draw()` was called on a sampler with nothing left (a `ListSampler` at its end)."""


class Sampler(ABC):
    """The source of parameter sets (see the module docstring for the guarantees)."""

    #: the sampler's short name, stored in its state
    kind: ClassVar[str] = ""
    #: parameter names, in the order of the values a simulation receives
    names: tuple[str, ...]

    def __init__(self, names: Sequence[str], seed: int = 0) -> None:
        self.names = _names(names)
        self.seed = check_non_negative_int("seed", seed, numpy=True)
        #: draws made so far (the index of the next one)
        self.position = 0

    def draw(self) -> dict[str, float]:
        """The next parameter set; advances the position.

        Raises:
            SamplerExhausted: nothing is left to draw.
        """
        values = self._draw(self.position)
        self.position += 1
        return values

    @abstractmethod
    def _draw(self, index: int) -> dict[str, float]:
        """Draw number `index` (called with 0, 1, 2... in order, or after `_seek`)."""

    def plan(self, n_draws: int) -> None:  # noqa: B027 - optional, a no-op by default
        """A hint: the study will draw about `n_draws` sets (the launcher passes its
        `n_simulations`). Ignored by default; `LatinHypercubeSampler(batch=None)` takes it
        as its design size."""

    def prepare(self) -> None:  # noqa: B027 - optional, a no-op by default
        """Compute now what the next draw would otherwise compute (the `Launcher` calls
        it in `start`, after `plan` and after a resumed state is loaded, before its
        thread draws): a draw runs on the launcher's thread under its lock while the
        trainer trains. The draws are the same with or without it. A no-op by default;
        `BreedSampler` ("lhs" explorer) and `DensitySampler` optimise their design here
        (seconds for a few hundred points), unless a loaded state held it."""

    def failed(self, simulation_id: int, parameters: Mapping[str, float]) -> None:  # noqa: B027
        """Told that simulation `simulation_id`, drawn with `parameters`, was given up
        for good: its restarts were used up and `LauncherTuning.on_failure` redraws
        ("redraw": a replacement is drawn next, under a new id) or abandons it. The
        launcher calls it under its lock, on its thread, before the replacement's
        draw. This is all a sampler hears of failures: a failed attempt that is
        restarted (the same id and parameters) is not told, and no loss comes with a
        given-up simulation (an adaptive sampler observes one only if samples it sent
        before failing were trained on: `AdaptiveSampler.observe`).

        Ignored by default (the replacement is the sampler's next draw);
        `DensitySampler`, `LatinHypercubeSampler` and `BreedSampler` with its "lhs"
        explorer, once their planned design is drawn, replace each by a point whose
        nearest draw was not given up instead of a design past the budget
        (`launcher.density_replace`). A sampler that keeps what it is told keeps
        it in its `state_dict` (a resumed study is not told again)."""

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable: what is needed to continue the sequence."""
        return {
            "kind": self.kind,
            "names": list(self.names),
            "seed": self.seed,
            "position": self.position,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a `state_dict()`: the next draw equals the one after the save.

        Raises:
            ValueError: the state is from a sampler of another kind, names or seed.
        """
        mine = self.state_dict()
        for key in ("kind", "names", "seed"):
            if state.get(key) != mine[key]:
                raise ValueError(
                    f"sampler state has {key}={state.get(key)!r} but this sampler has "
                    f"{key}={mine[key]!r}: build the sampler with the arguments of the saved run"
                )
        position = state.get("position")
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise ValueError(f"sampler state has an invalid position {position!r}")
        self._seek(position)
        self.position = position

    def _seek(self, position: int) -> None:  # noqa: B027 - stateless samplers need nothing
        """Prepare `_draw(position)` (for samplers with internal state)."""

    def __repr__(self) -> str:
        return f"{self.kind}(names={list(self.names)}, seed={self.seed}, position={self.position})"


class BoxSampler(Sampler):
    """A sampler of the box `bounds`, from points of the unit hypercube.

    The unit cube maps to the box here, and only here (`_scale`, and back `_unit`):
    linearly for a parameter given as ``(low, high)``, log-uniformly for one given as
    ``(low, high, "log")`` (``log(value)`` is linear in the unit coordinate), so every
    sampler built on it, space-filling or adaptive, draws a log-scale parameter
    log-uniformly and hands the simulation the value itself. `bounds` keeps the
    ``(low, high)`` pairs; `log_scale` names the log-scale parameters.

    Raises:
        ValueError: a bound is malformed (`launcher.sampler_bounds.check_bounds`: a
            scale other than "linear" or "log", a string, bool, NaN or infinite
            number, low > high...), naming the parameter, the value and the fix.
    """

    def __init__(self, bounds: Bounds, seed: int = 0) -> None:
        self.bounds, log_scale = check_bounds(bounds)
        super().__init__(list(self.bounds), seed)
        #: the parameters drawn log-uniformly, in `names` order
        self.log_scale: tuple[str, ...] = tuple(n for n in self.names if n in log_scale)
        self._log = np.array([name in log_scale for name in self.names], dtype=bool)
        lows = np.array([low for low, _ in self.bounds.values()], dtype=np.float64)
        highs = np.array([high for _, high in self.bounds.values()], dtype=np.float64)
        self._box = (lows, highs)  # the bounds, for clipping the values drawn
        # `_low` and `_span` are in the sampling coordinate (the log of a log-scale
        # parameter); `_span > 0` marks the varying parameters either way
        self._low, high = self._coordinate(lows), self._coordinate(highs)
        self._span = high - self._low

    def _coordinate(self, values: np.ndarray) -> np.ndarray:
        """`values` (the last axis in `names` order) in the sampling coordinate: the
        natural log of each log-scale parameter, the others as they are."""
        if not self.log_scale:
            return values
        return np.where(self._log, np.log(np.where(self._log, values, 1.0)), values)

    def _scale(self, unit: np.ndarray) -> dict[str, float]:
        """The point `unit` of the unit cube as a parameter set (inside the bounds)."""
        values = self._low + unit * self._span
        if self.log_scale:
            values = np.where(self._log, np.exp(values), values)
        # clipped: low + 1.0 * (high - low), or exp(log(low)), may round past a bound
        values = np.clip(values, *self._box)
        return {name: float(v) for name, v in zip(self.names, values, strict=True)}

    def _unit(self, parameters: Mapping[str, float]) -> np.ndarray:
        """`parameters` as a point of the unit cube (0 for a fixed parameter)."""
        return self._units([parameters])[0]

    def _units(self, parameter_sets: Sequence[Mapping[str, float]]) -> np.ndarray:
        """`_unit` of each of `parameter_sets`, one row each (elementwise: the same
        values as one at a time, at a fraction of the cost for many). Values are
        clipped to the bounds first (a log-scale parameter's log needs it > 0)."""
        values = np.array(
            [[parameters[name] for name in self.names] for parameters in parameter_sets],
            dtype=np.float64,
        ).reshape(len(parameter_sets), len(self.names))
        values = self._coordinate(np.clip(values, *self._box))
        span = np.where(self._span > 0, self._span, 1.0)
        return np.clip((values - self._low) / span, 0.0, 1.0)

    def _unit_distance(self, name: str, value: Any) -> float:
        """Option `name`, a distance in the unit cube over the varying parameters (a
        no-go radius, a spacing), checked: a number in [0, sqrt(v)] for `v` varying
        parameters, the cube's diagonal (no two points are farther apart; a fixed
        parameter, low == high, adds no length). With none varying, [0, 1] and no
        effect: every draw is the one fixed point.

        Raises:
            ValueError: not such a number; the message names `name`, its range and why.
        """
        varying = [n for n, span in zip(self.names, self._span, strict=True) if span > 0]
        diagonal = math.sqrt(max(len(varying), 1))
        try:
            return bounded_number(name, value, 0.0, diagonal)
        except ValueError as error:
            over = (
                f"the {plural(len(varying), 'varying parameter')} ({', '.join(varying)}; "
                f"a fixed one, low == high, does not count), whose diagonal is {diagonal:.4g}"
                if varying
                else "no varying parameter (every one fixed: it has no effect)"
            )
            raise ValueError(f"{error}: a distance in the unit cube over {over}") from None

    def state_dict(self) -> dict[str, Any]:
        # (no entry for a linear box: such a state is as it was before log scales)
        state = super().state_dict()
        return {**state, "log_scale": list(self.log_scale)} if self.log_scale else state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state.get("log_scale", [])
        if saved != list(self.log_scale):
            raise ValueError(
                f"sampler state has log_scale={saved!r} but this sampler has "
                f"log_scale={list(self.log_scale)!r}: build the sampler with the bounds of the "
                f'saved run (a log-scale parameter as (low, high, "log"))'
            )
        super().load_state_dict(state)


# -- checks -----------------------------------------------------------------------------


def _names(names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        raise ValueError(f"names must be a sequence of strings, not the string {names!r}")
    out = tuple(names)
    if not out:
        raise ValueError("a sampler needs at least one parameter name")
    for name in out:
        if not isinstance(name, str) or not name:
            raise ValueError(f"parameter names must be non-empty strings, not {name!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"parameter names must be unique: {list(out)}")
    return out


def parameter_values(names: tuple[str, ...], drawn: Any, what: str) -> dict[str, float]:
    """`drawn` as a parameter set: it must map exactly `names` to finite numbers;
    ValueError naming `what` otherwise."""
    if not isinstance(drawn, Mapping) or set(drawn) != set(names):
        keys = sorted(drawn) if isinstance(drawn, Mapping) else drawn
        raise ValueError(f"{what} must map exactly {list(names)} to numbers, got {keys!r}")
    out = {}
    for name in names:
        try:
            value = float(drawn[name])
        except (TypeError, ValueError):
            raise ValueError(f"{what}: {name}={drawn[name]!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"{what}: {name}={value} is not finite")
        out[name] = value
    return out


def qmc_engine(name: str, d: int, seed: Any, **options: Any) -> Any:
    """The `scipy.stats.qmc` engine `name` ("Sobol", "Halton", "LatinHypercube") in `d`
    dimensions, seeded with a numpy Generator: `rng=` (scipy >= 1.15), else `seed=`.

    scipy is imported here, at the first engine: `scipy.stats` costs about a second of
    CPU to import, which every process importing the samplers paid (each trainer of a
    study, each rank, whatever its sampler) before any draw needed it.
    """
    from scipy.stats import qmc

    cls = getattr(qmc, name)
    rng = np.random.default_rng(seed)
    try:
        return cls(d, rng=rng, **options)
    except TypeError:  # scipy < 1.15
        return cls(d, seed=rng, **options)


def bounded_number(
    name: str, value: Any, low: float, high: float, *, low_open: bool = False
) -> float:
    """`value` as a float in [low, high] (or (low, high]), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a number, not {value!r}")
    out = float(value)
    inside = (low < out if low_open else low <= out) and out <= high and math.isfinite(out)
    if not inside:
        interval = f"{'(' if low_open else '['}{low}, {high}{']' if math.isfinite(high) else ')'}"
        raise ValueError(f"{name} must be finite and in {interval}, not {value!r}")
    return out


def decay_draws_for(final: float | None, decay_draws: Any, exploration: float) -> int | None:
    """Breed's `decay_draws`, checked against its `exploration_final` (`final`): None, or
    a positive int that only a decaying share (`final` given) reads. Alone it would decay
    nothing, silently (the share stays `exploration`): refused, naming the fix."""
    if decay_draws is None:
        return None
    draws = check_positive_int("decay_draws", decay_draws)
    if final is None:
        raise ValueError(
            f"decay_draws={decay_draws} without exploration_final: the exploration share "
            f"stays exploration={exploration:g} at every draw; give exploration_final (the "
            f"share reached at draw decay_draws) or drop decay_draws"
        )
    return draws
