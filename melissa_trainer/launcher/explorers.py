"""Which exploration a `BreedSampler` runs (`exploration.Exploration`): the explorers its
``explorer`` option names (`EXPLORERS`: the scrambled low-discrepancy sequences of
`ENGINES`, or "lhs", an optimised Latin hypercube), the one "auto" picks for a number of
varying parameters (`engine_for`), and how many gap-filling candidates each draws among
(`candidates_for`). Pure: constants and functions of their arguments.
"""

from __future__ import annotations

__all__ = [
    "AUTO_SEQUENCE_DIMS",
    "ENGINES",
    "EXPLORERS",
    "GAP_CANDIDATES",
    "candidates_for",
    "engine_for",
]


#: the low-discrepancy sequences an exploration can follow (scrambled, seeded like
#: `SobolSampler` / `HaltonSampler` with the same seed: the same points)
ENGINES: dict[str, str] = {"sobol": "Sobol", "halton": "Halton"}  # scipy.stats.qmc's


#: every explorer: the sequences, and "lhs", a Latin hypercube of the planned draws
#: optimised for its centred discrepancy (scipy's ``optimization="random-cd"``)
EXPLORERS = (*ENGINES, "lhs")


# (LHS_MAX_BLOCK, the largest design, is `exploration_state`'s, which checks a state's)
#: explorer "auto": the gap-filling Sobol' sequence up to this many varying parameters,
#: "lhs" above (chosen on the tuning seeds of `benchmarks/active_sampling.py`: with 3
#: the Sobol' draws beat every fixed design, with 6 an optimised Latin hypercube beat
#: them; between 3 and 6 the threshold is not measured)
AUTO_SEQUENCE_DIMS = 3


#: a sequence's gap-filling candidates when none are named (`candidates_for`)
GAP_CANDIDATES = 16


def candidates_for(engine: str, candidates: int | None) -> int:
    """The candidates an exploration of `engine` draws among: `candidates`, or when
    None `GAP_CANDIDATES` for a sequence and 1 for "lhs" (the design in its own order:
    on the tuning seeds of `benchmarks/active_sampling.py` the gap-filling order, which
    streams the design's outermost points first, erred more than the same design in
    its order)."""
    if candidates is not None:
        return candidates
    return 1 if engine == "lhs" else GAP_CANDIDATES


def engine_for(explorer: str, varying: int) -> str:
    """The engine that the `explorer` option names for `varying` varying parameters:
    itself, or for "auto" "sobol" up to `AUTO_SEQUENCE_DIMS` and "lhs" above.

    Raises:
        ValueError: an unknown explorer.
    """
    if explorer == "auto":
        return "sobol" if varying <= AUTO_SEQUENCE_DIMS else "lhs"
    if explorer not in EXPLORERS:
        raise ValueError(f"explorer must be one of {('auto', *EXPLORERS)}, not {explorer!r}")
    return explorer
