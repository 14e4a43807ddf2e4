"""How many simulations fail before a study whose solver fails along a long boundary
finishes: the failing-study setup of ``tests/launcher/test_surrogate_failing_study.py``
(``eps`` in (1e-3, 1e-1), log scale, ``a`` in (0, 1); the solver fails for good
wherever ``eps < 0.003``, a strip along the whole of ``a``; each success's loss is
``1 / eps``, highest next to the failing strip, where an acquisition aims), replayed
without processes: each draw fails or succeeds at once (one job at a time), a failure
told to the sampler (`Sampler.failed`), a success observed, until `--n` succeeded (or
3 n failed).

Ours: the samplers as they are (the no-go zones' risk rule, `launcher.failed_zones`,
risk 1/4 within 3 `avoid` of a failure; `--risk` and `--reach` set others); baseline:
the same samplers with the rule of before (``risk=0.5``: the nearest-known-point rule
alone), each seed run by both, alternately (ours first on even seeds). Rows per
sampler: the median failures per study (the e2e test allows n/2:
``min_finished_fraction`` 0.5), and the medians of the coverage of where the solver
succeeds (over 4,000 uniform points there, the mean and the largest distance to the
nearest successful draw, in the unit square: lower is better) and of the gap between
the failing strip and the nearest success (how close the draws get to the boundary,
where the loss is highest). All are lower-is-better, so ratio = baseline / ours
(higher is better, as every benchmark's); target 1.0 (fewer failures, coverage and gap
no worse). With ``--json`` the last line also holds each
seed's failures and coverage, ``[[ours...], [baseline...]]`` per sampler (their means:
a finer figure than the medians of integer counts).

    python benchmarks/failing_boundary.py                 # seeds 100-119
    python benchmarks/failing_boundary.py --quick --json  # seeds 100-104
    python benchmarks/failing_boundary.py --seeds $(seq 300 339) --reach 2 \
        --arms "surrogate, defaults" --json    # ours with another reach, held-out seeds
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.launcher import BreedSampler, SurrogateSampler  # noqa: E402
from melissa_trainer.launcher.adaptive import AdaptiveSampler  # noqa: E402

BOX = {"eps": (1e-3, 1e-1, "log"), "a": (0.0, 1.0)}
FAILS_BELOW = 0.003
#: the failing strip's edge in the unit square (eps's log)
EDGE = float(np.log(FAILS_BELOW / 1e-3) / np.log(100.0))
#: each arm's sampler of a seed and the zones' options (`risk`, `reach`; none: defaults)
SAMPLERS: dict[str, Callable[..., AdaptiveSampler]] = {
    "surrogate, the e2e's (exploration 0, min_observations 4)": lambda seed, **z: SurrogateSampler(
        BOX, seed=seed, exploration=0.0, min_observations=4, **z
    ),
    "surrogate, defaults": lambda seed, **z: SurrogateSampler(BOX, seed=seed, **z),
    "breed, defaults (exploring only)": lambda seed, **z: BreedSampler(BOX, seed=seed, **z),
    "breed, exploration 0.3, min_observations 4": lambda seed, **z: BreedSampler(
        BOX, seed=seed, exploration=0.3, min_observations=4, **z
    ),
}


def unit(parameters: dict[str, float]) -> list[float]:
    return [float(np.log(parameters["eps"] / 1e-3) / np.log(100.0)), parameters["a"]]


def study(sampler: AdaptiveSampler, n: int) -> dict[str, float]:
    """One study (module docstring): failures, coverage and the gap to the strip."""
    sampler.plan(n)
    good: list[list[float]] = []
    failures, sid = 0, 0
    while len(good) < n and failures < 3 * n:
        parameters = sampler.draw()
        if parameters["eps"] < FAILS_BELOW:
            failures += 1
            sampler.failed(sid, parameters)
        else:
            good.append(unit(parameters))
            sampler.observe(sid, parameters, 1.0 / parameters["eps"])
        sid += 1
    test = np.random.default_rng(0).random((4000, 2))
    test = test[test[:, 0] >= EDGE]
    drawn = np.array(good)
    nearest = np.sqrt(np.min(np.sum((test[:, None, :] - drawn[None]) ** 2, axis=2), axis=1))
    gap = float(drawn[:, 0].min() - EDGE)
    return {"failures": failures, "coverage": float(nearest.mean()),
            "largest gap": float(nearest.max()), "to the strip": gap}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(100, 120)))
    parser.add_argument("--n", type=int, default=12, help="successes per study")
    parser.add_argument("--risk", type=float, help="ours' risk (default: the samplers')")
    parser.add_argument("--reach", type=float, help="ours' reach (default: the samplers')")
    parser.add_argument("--arms", nargs="+", choices=sorted(SAMPLERS), default=list(SAMPLERS))
    add_flags(parser, quick="seeds 100-104")
    opts = parser.parse_args()
    zone = {k: v for k, v in (("risk", opts.risk), ("reach", opts.reach)) if v is not None}
    seeds = list(range(100, 105)) if opts.quick else opts.seeds
    rows: list[dict[str, Any]] = []
    per_seed: dict[str, list[list[float]]] = {}
    coverage: dict[str, list[list[float]]] = {}
    for name in opts.arms:
        make = SAMPLERS[name]
        ours: list[dict[str, float]] = []
        base: list[dict[str, float]] = []
        for seed in seeds:
            arms = [True, False] if seed % 2 == 0 else [False, True]
            for mine in arms:  # interleaved: the same seed, ours and the baseline
                sampler = make(seed, **(zone if mine else {"risk": 0.5}))
                (ours if mine else base).append(study(sampler, opts.n))
        per_seed[name] = [[r["failures"] for r in ours], [r["failures"] for r in base]]
        coverage[name] = [[r["coverage"] for r in ours], [r["coverage"] for r in base]]
        for key, unit_name in (("failures", "count"), ("coverage", "dist"),
                               ("largest gap", "dist"), ("to the strip", "dist")):  # fmt: skip
            a = statistics.median(r[key] for r in ours)
            b = statistics.median(r[key] for r in base)
            rows.append({"case": f"{name}: {key}", "ours": a, "baseline": b, "unit": unit_name,
                         "ratio": b / a if a else None, "target": 1.0})  # fmt: skip
    title = (f"failures along a long failing boundary ({len(seeds)} seeds, n={opts.n}, ours "
             f"{zone or 'the defaults'}; medians)")  # fmt: skip
    finish(rows, title, width=60, as_json=opts.json, seeds=seeds, zones=zone,
           per_seed_failures=per_seed, per_seed_coverage=coverage)  # fmt: skip


if __name__ == "__main__":
    main()
