"""Parameter samplers: where the input parameters of each simulation come from.

A sampler hands out one parameter set (`{name: float}`, in `names` order) per `draw()`.
Every sampler is *seeded and reproducible* (the same seed gives the same sequence) and
*resumable*: its position is part of `state_dict()`, and a sampler built with the same
arguments that loads it continues exactly where the saved one stopped.

Draw `i` of a random sampler depends only on `(seed, i)` (a generator seeded with
``[seed, i]``; for a Latin hypercube, ``[seed, design]``), so resuming needs nothing but
the position. The quasi-random ones (Halton, Sobol') use `scipy.stats.qmc` and resume with
``fast_forward``.

Samplers are not thread-safe; the launcher draws under its lock.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from scipy.stats import qmc

__all__ = [
    "CallableSampler",
    "HaltonSampler",
    "LatinHypercubeSampler",
    "ListSampler",
    "Sampler",
    "SamplerExhausted",
    "SobolSampler",
    "UniformSampler",
    "make_sampler",
]

Bounds = Mapping[str, tuple[float, float]]


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
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, not {seed!r}")
        self.seed = int(seed)
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


class _BoxSampler(Sampler):
    """A sampler of the box `bounds`, from points of the unit hypercube."""

    def __init__(self, bounds: Bounds, seed: int = 0) -> None:
        self.bounds = _bounds(bounds)
        super().__init__(list(self.bounds), seed)
        self._low = np.array([low for low, _ in self.bounds.values()], dtype=np.float64)
        self._span = np.array([high - low for low, high in self.bounds.values()], np.float64)

    def _scale(self, unit: np.ndarray) -> dict[str, float]:
        values = self._low + unit * self._span
        return {name: float(v) for name, v in zip(self.names, values, strict=True)}


class UniformSampler(_BoxSampler):
    """Independent uniform draws in `bounds` (`{name: (low, high)}`)."""

    kind = "uniform"

    def _draw(self, index: int) -> dict[str, float]:
        rng = np.random.default_rng([self.seed, index])
        return self._scale(rng.random(len(self.names)))


class LatinHypercubeSampler(_BoxSampler):
    """Latin hypercube designs (`scipy.stats.qmc.LatinHypercube`) in `bounds`.

    Every consecutive `batch` draws form one design: each parameter's range is cut into
    `batch` equal strata, each hit once. Design `k` is seeded by ``[seed, k]``.

    Args:
        batch: the size of each design. None: the `n_draws` that `plan` announces (the
            launcher plans `n_simulations`, so the study's first design is exactly its
            simulations); calling `draw` on an unplanned sampler with `batch=None` raises.
    """

    kind = "lhs"

    def __init__(self, bounds: Bounds, seed: int = 0, batch: int | None = None) -> None:
        super().__init__(bounds, seed)
        if batch is not None:
            _positive_int("batch", batch)
        self.batch = batch
        self._design: tuple[int, np.ndarray] | None = None

    def plan(self, n_draws: int) -> None:  # noqa: B027 - optional, a no-op by default
        if self.batch is None and self.position == 0 and n_draws >= 1:
            self.batch = int(n_draws)

    def _draw(self, index: int) -> dict[str, float]:
        if self.batch is None:
            raise ValueError(
                "LatinHypercubeSampler(batch=None) does not know its design size: pass "
                "batch=, or let a Launcher plan it (its n_simulations)"
            )
        number, row = divmod(index, self.batch)
        if self._design is None or self._design[0] != number:
            engine = _engine(qmc.LatinHypercube, len(self.names), [self.seed, number])
            self._design = (number, engine.random(self.batch))
        return self._scale(self._design[1][row])

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "batch": self.batch}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state.get("batch")
        if self.batch is not None and saved is not None and saved != self.batch:
            raise ValueError(f"sampler state has batch={saved} but this sampler has {self.batch}")
        super().load_state_dict(state)
        if saved is not None:
            self.batch = int(saved)


class _QMCSampler(_BoxSampler):
    """A scipy low-discrepancy sequence, drawn one point at a time."""

    _engine_class: Any

    def __init__(self, bounds: Bounds, seed: int = 0, scramble: bool = True) -> None:
        super().__init__(bounds, seed)
        self.scramble = bool(scramble)
        self._new_engine()

    def _new_engine(self) -> None:
        self._engine = _engine(
            self._engine_class, len(self.names), self.seed, scramble=self.scramble
        )

    def _draw(self, index: int) -> dict[str, float]:
        with warnings.catch_warnings():
            # Sobol' warns when the points drawn so far are not a power of two; a study
            # draws one at a time and runs as many simulations as it was asked to.
            warnings.filterwarnings("ignore", message=".*balance properties.*")
            point = self._engine.random(1)[0]
        return self._scale(point)

    def _seek(self, position: int) -> None:
        self._new_engine()
        if position:
            self._engine.fast_forward(position)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "scramble": self.scramble}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("scramble", self.scramble) != self.scramble:
            raise ValueError(
                f"sampler state has scramble={state.get('scramble')} but this sampler has "
                f"scramble={self.scramble}"
            )
        super().load_state_dict(state)


class HaltonSampler(_QMCSampler):
    """The Halton sequence (`scipy.stats.qmc.Halton`, scrambled by default) in `bounds`."""

    kind = "halton"
    _engine_class = qmc.Halton


class SobolSampler(_QMCSampler):
    """The Sobol' sequence (`scipy.stats.qmc.Sobol`, scrambled by default) in `bounds`."""

    kind = "sobol"
    _engine_class = qmc.Sobol


class ListSampler(Sampler):
    """The given parameter sets, in order; `draw` raises `SamplerExhausted` at the end.

    Every set must have the same names (those of the first set give the order).
    """

    kind = "list"

    def __init__(self, parameters: Sequence[Mapping[str, float]]) -> None:
        if isinstance(parameters, Mapping) or not isinstance(parameters, Sequence):
            raise ValueError("parameters must be a sequence of {name: value} mappings")
        if not parameters:
            raise ValueError("ListSampler needs at least one parameter set")
        super().__init__(list(parameters[0]))
        self._sets = [
            _values(self.names, p, f"parameter set {i}") for i, p in enumerate(parameters)
        ]

    def __len__(self) -> int:
        return len(self._sets)

    def _draw(self, index: int) -> dict[str, float]:
        if index >= len(self._sets):
            raise SamplerExhausted(
                f"the {len(self._sets)} parameter sets of the ListSampler are all used; give "
                f"more (spares for redraws), or set on_failure='abandon'"
            )
        return dict(self._sets[index])

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "size": len(self._sets)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        position = state.get("position")
        if isinstance(position, int) and position > len(self._sets):
            raise ValueError(
                f"sampler state is at position {position}, past the {len(self._sets)} sets"
            )
        super().load_state_dict(state)


class CallableSampler(Sampler):
    """Parameter sets from a function: draw `i` is ``fn(i, rng)``.

    `rng` is a `numpy.random.Generator` seeded with ``[seed, i]``, so the function is
    reproducible and resumable if it depends only on its arguments. It returns a mapping
    with exactly `names` as keys and finite numbers as values.
    """

    kind = "callable"

    def __init__(
        self,
        fn: Callable[[int, np.random.Generator], Mapping[str, float]],
        names: Sequence[str],
        seed: int = 0,
    ) -> None:
        if not callable(fn):
            raise ValueError(f"fn must be callable, not {fn!r}")
        super().__init__(names, seed)
        self._fn = fn

    def _draw(self, index: int) -> dict[str, float]:
        drawn = self._fn(index, np.random.default_rng([self.seed, index]))
        return _values(self.names, drawn, f"the sampler function's draw {index}")


_KINDS: dict[str, type[_BoxSampler]] = {
    "uniform": UniformSampler,
    "lhs": LatinHypercubeSampler,
    "halton": HaltonSampler,
    "sobol": SobolSampler,
}


def make_sampler(kind: str, bounds: Bounds, seed: int = 0, **options: Any) -> Sampler:
    """A sampler of the box `bounds` by name: "uniform", "lhs", "halton", "sobol" or
    "breed" (adaptive: `launcher.adaptive.BreedSampler`).

    `options` go to the class (`batch` for "lhs", `scramble` for "halton"/"sobol").
    """
    if kind == "breed":  # imported here: launcher.adaptive imports this module
        from melissa_trainer.launcher.adaptive import BreedSampler

        cls: type[_BoxSampler] = BreedSampler
    elif kind in _KINDS:
        cls = _KINDS[kind]
    else:
        raise ValueError(f"unknown sampler {kind!r}; choose one of {sorted([*_KINDS, 'breed'])}")
    try:
        return cls(bounds, seed, **options)
    except TypeError as exc:
        raise ValueError(f"bad option for the {kind!r} sampler: {exc}") from None


# -- validation -------------------------------------------------------------------------


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


def _bounds(bounds: Bounds) -> dict[str, tuple[float, float]]:
    if not isinstance(bounds, Mapping) or not bounds:
        raise ValueError("bounds must be a non-empty mapping {name: (low, high)}")
    out = {}
    for name, pair in bounds.items():
        try:
            low, high = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise ValueError(
                f"bounds of {name!r} must be (low, high) numbers, not {pair!r}"
            ) from None
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(f"bounds of {name!r} must be finite with low <= high, not {pair!r}")
        out[name] = (low, high)
    _names(list(out))
    return out


def _values(names: tuple[str, ...], drawn: Any, what: str) -> dict[str, float]:
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


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, not {value!r}")


def _engine(cls: Any, d: int, seed: Any, **options: Any) -> Any:
    """A qmc engine seeded with a numpy Generator: `rng=` (scipy >= 1.15), else `seed=`."""
    rng = np.random.default_rng(seed)
    try:
        return cls(d, rng=rng, **options)
    except TypeError:  # scipy < 1.15
        return cls(d, seed=rng, **options)
