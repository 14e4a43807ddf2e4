"""Parameter samplers: where the input parameters of each simulation come from.

A sampler hands out one parameter set (`{name: float}`, in `names` order) per `draw()`.
Every sampler is *seeded and reproducible* (the same seed gives the same sequence) and
*resumable*: its position is part of `state_dict()`, and a sampler built with the same
arguments that loads it continues exactly where the saved one stopped.

Draw `i` of a random sampler depends only on `(seed, i)` (a generator seeded with
``[seed, i]``; for a Latin hypercube, ``[seed, design]``: `latin_hypercube`), so resuming
needs nothing but the position. The quasi-random ones (Halton, Sobol') use
`scipy.stats.qmc` and resume with ``fast_forward``.

Samplers are not thread-safe; the launcher draws under its lock.
"""

from __future__ import annotations

import difflib
import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.density import DensitySampler
from melissa_trainer.launcher.latin_hypercube import LatinHypercubeSampler
from melissa_trainer.launcher.sampler_base import (
    Bounds,
    BoxSampler,
    Sampler,
    SamplerExhausted,
    parameter_values,
    qmc_engine,
)
from melissa_trainer.launcher.surrogate import SurrogateSampler

__all__ = [
    "CallableSampler",
    "HaltonSampler",
    "ListSampler",
    "SobolSampler",
    "UniformSampler",
    "make_sampler",
]


class UniformSampler(BoxSampler):
    """Independent uniform draws in `bounds` (`{name: (low, high)}`)."""

    kind = "uniform"

    def _draw(self, index: int) -> dict[str, float]:
        rng = np.random.default_rng([self.seed, index])
        return self._scale(rng.random(len(self.names)))


class _QMCSampler(BoxSampler):
    """A scipy low-discrepancy sequence, drawn one point at a time."""

    _engine_name: str  # the scipy.stats.qmc engine's name (`qmc_engine`)

    def __init__(self, bounds: Bounds, seed: int = 0, scramble: bool = True) -> None:
        super().__init__(bounds, seed)
        self.scramble = bool(scramble)
        self._new_engine()

    def _new_engine(self) -> None:
        self._engine = qmc_engine(
            self._engine_name, len(self.names), self.seed, scramble=self.scramble
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
    _engine_name = "Halton"


class SobolSampler(_QMCSampler):
    """The Sobol' sequence (`scipy.stats.qmc.Sobol`, scrambled by default) in `bounds`."""

    kind = "sobol"
    _engine_name = "Sobol"


class ListSampler(Sampler):
    """The given parameter sets, in order; `draw` raises `SamplerExhausted` at the end.

    Every set must have the same names (those of the first set give the order).
    """

    kind = "list"

    def __init__(self, parameters: Sequence[Mapping[str, float]]) -> None:
        if isinstance(parameters, (Mapping, str)) or not isinstance(parameters, Sequence):
            raise ValueError(
                "parameters must be a sequence of {name: value} mappings, not "
                f"{_given(parameters)}"
            )
        if not parameters:
            raise ValueError("ListSampler needs at least one parameter set")
        super().__init__(list(parameters[0]))
        self._sets = [
            parameter_values(self.names, p, f"parameter set {i}") for i, p in enumerate(parameters)
        ]

    def __len__(self) -> int:
        return len(self._sets)

    def _draw(self, index: int) -> dict[str, float]:
        if index >= len(self._sets):
            raise SamplerExhausted(
                f"the {plural(len(self._sets), 'parameter set')} of the ListSampler "
                f"{'is' if len(self._sets) == 1 else 'are all'} used; give "
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
        return parameter_values(self.names, drawn, f"the sampler function's draw {index}")


_KINDS: dict[str, type[BoxSampler]] = {
    "uniform": UniformSampler,
    "lhs": LatinHypercubeSampler,
    "halton": HaltonSampler,
    "sobol": SobolSampler,
}


def make_sampler(kind: str, bounds: Bounds, seed: int = 0, **options: Any) -> Sampler:
    """A sampler of the box `bounds` by name: "uniform", "lhs", "halton", "sobol",
    "breed", "surrogate" or "density" (adaptive: `launcher.breed.BreedSampler`,
    `launcher.surrogate.SurrogateSampler`, `launcher.density.DensitySampler`).

    `bounds` maps each parameter to ``(low, high)``, drawn on a linear scale, or to
    ``(low, high, "log")``, drawn on a log scale (log-uniformly, ``0 < low``): every
    sampler, adaptive ones included, then spreads its draws evenly over the decades,
    and the simulation receives the value itself, not its log. For example
    ``make_sampler("lhs", {"nu": (0.003, 0.05, "log"), "A": (0.5, 1.5)})``.

    `options` go to the class (`batch` for "lhs", `scramble` for "halton"/"sobol").
    """
    kinds = _all_kinds()
    cls = kinds.get(kind)
    if cls is None:
        close = _close_kind(kind) if isinstance(kind, str) else None
        # ("LHS" was refused with the list alone, its lowercase name in it: htrial17)
        hint = f"did you mean {close!r}? (the names are lowercase) " if close else ""
        raise ValueError(
            f"unknown sampler {kind!r} (make_sampler's kind): {hint}choose one of "
            f"{sorted(kinds)}, or give Launcher(sampler=...) a Sampler of your own"
        )
    unknown = [name for name in options if name not in _options(cls)]
    if unknown:
        raise ValueError(
            f"bad option for the {kind!r} sampler: {_unknown_option(kind, unknown[0], kinds)}"
        )
    try:
        return cls(bounds, seed, **options)
    except TypeError as exc:
        raise ValueError(f"bad option for the {kind!r} sampler: {exc}") from None


def _all_kinds() -> dict[str, type[BoxSampler]]:
    """`make_sampler`'s kinds: the box samplers and the adaptive ones."""
    adaptive: dict[str, type[BoxSampler]] = {
        "breed": BreedSampler,
        "surrogate": SurrogateSampler,
        "density": DensitySampler,
    }
    return {**_KINDS, **adaptive}


def _close_kind(name: str) -> str | None:
    """The kind `name` likely means: itself lowercased, else a close spelling; or None."""
    kinds = _all_kinds()
    if name.lower() in kinds:
        return name.lower()
    close = difflib.get_close_matches(name.lower(), kinds, n=1)
    return close[0] if close else None


def as_sampler(sampler: object) -> Sampler:
    """`Launcher`'s `sampler` argument as a `Sampler`: a Sampler as it is, a sequence of
    parameter sets as a `ListSampler`. A str (a sampler's name: ``Launcher(cmd, "lhs")``
    used to say "parameter set 0 must map exactly ['l'] to numbers", htrial17) or a
    mapping (the bounds) is refused with a ValueError naming the argument and the
    `make_sampler` call that gives a sampler."""
    if isinstance(sampler, Sampler):
        return sampler
    what = "Launcher's `sampler` (its second argument) is a Sampler or a list of parameter sets"
    example = "make_sampler('lhs', {'a': (0.0, 1.0)}, seed=0)"
    if isinstance(sampler, str):
        kind = _close_kind(sampler)
        call = (
            f"make_sampler({kind!r}, bounds, seed=0)"
            if kind
            else f"make_sampler(kind, bounds, seed=0) with a kind of {sorted(_all_kinds())}"
        )
        raise ValueError(
            f"{what} ({{name: value}} mappings), not the str {sampler!r}: for a sampler "
            f"by name give {call}, e.g. Launcher(simulation, {example}, n_simulations)"
        )
    if isinstance(sampler, Mapping):
        raise ValueError(
            f"{what} ({{name: value}} mappings), not one mapping {dict(sampler)!r}: for "
            f"a sampler of these bounds give make_sampler(kind, bounds, seed=0), e.g. "
            f"{example}; for one simulation of these values, a list of it: [{{...}}]"
        )
    return ListSampler(sampler)  # type: ignore[arg-type]  # (it refuses a non-sequence)


def _given(value: object) -> str:
    """`value` in a refusal: a str or mapping as itself, else its type."""
    return f"{value!r}" if isinstance(value, (str, Mapping)) else type(value).__name__


def _options(cls: type[BoxSampler]) -> list[str]:
    """The options `make_sampler` passes on to `cls`: its constructor's keyword
    parameters after the bounds and the seed, in their order."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(cls.__init__).parameters.values()
    return [
        p.name for p in parameters if p.kind in kinds and p.name not in ("self", "bounds", "seed")
    ]


def _unknown_option(kind: str, name: str, kinds: Mapping[str, type[BoxSampler]]) -> str:
    """Why `name` is refused for the sampler `kind`, and the fix: the option it is likely a
    misspelling of, the options `kind` takes, and which other samplers take `name` (a
    newcomer passing Breed's `exploration` to "lhs" learns where it belongs)."""
    accepted = _options(kinds[kind])
    close = difflib.get_close_matches(name, accepted, n=1)
    message = f"no option {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
    message += f"; its options are {', '.join(accepted)}" if accepted else "; it takes none"
    elsewhere = [other for other, cls in kinds.items() if other != kind and name in _options(cls)]
    if elsewhere:
        message += f" ({name!r} is an option of {' and '.join(repr(o) for o in sorted(elsewhere))})"
    return message
