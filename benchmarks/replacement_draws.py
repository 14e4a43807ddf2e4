"""Where `DensitySampler` (or, with ``--sampler breed``, `BreedSampler` with its "lhs"
explorer, its default in 6 parameters) draws the replacements of failed simulations:
ours (told of each failure, `Sampler.failed`: a point whose nearest draw did not fail,
`launcher.density_replace`) against the baseline (told nothing: the next optimised
design's points, what it drew before), on replayed studies whose solver fails for good
in a region, and the sampler's CPU time per study (the baseline's includes optimising
the second design, on the launcher's thread under its lock in a study).

Each study draws until `n` simulations succeeded (6 parameters in the unit box, the
density sampler's defaults, no loss observed), a failure told at once (one job at a
time). Per region and size: the failures per study (the design's own plus the
replacements'), and the coverage of where the solver succeeds (the mean distance of
4,000 uniform points there to the nearest successful draw, lower is better). Ours and
the baseline run the same seeds, alternately; the rows give the means over seeds (the
failures are counts) and the medians of the CPU times.

    python benchmarks/replacement_draws.py            # 60 seeds
    python benchmarks/replacement_draws.py --quick --json
    python benchmarks/replacement_draws.py --sampler breed
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.launcher import BreedSampler, DensitySampler  # noqa: E402

BOX = {f"p{i}": (0.0, 1.0) for i in range(6)}
#: where the solver fails for good (points of the unit box, one row each)
REGIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "slab p0 > 0.8": lambda u: u[:, 0] > 0.8,
    "corner p0, p1 > 0.6": lambda u: (u[:, 0] > 0.6) & (u[:, 1] > 0.6),
}


SAMPLERS = {"density": DensitySampler, "breed": BreedSampler}


def study(
    seed: int, n: int, fails: Callable[[np.ndarray], np.ndarray], tell: bool, kind: str = "density"
) -> dict:
    """One study: failures, the successful draws' coverage, the sampler's CPU seconds."""
    sampler = SAMPLERS[kind](BOX, seed=seed)
    cpu = time.process_time()
    sampler.plan(n)
    good: list[np.ndarray] = []
    failures = 0
    while len(good) < n and failures < 3 * n:
        parameters = sampler.draw()
        point = np.array([[parameters[k] for k in BOX]])
        if fails(point)[0]:
            failures += 1
            if tell:
                sampler.failed(sampler.position - 1, parameters)
        else:
            good.append(point[0])
    cpu = time.process_time() - cpu
    test = np.random.default_rng(0).random((4000, len(BOX)))
    test = test[~fails(test)]
    drawn = np.array(good)
    nearest = np.sqrt(np.min(np.sum((test[:, None, :] - drawn[None]) ** 2, axis=2), axis=1))
    return {"failures": failures, "coverage": float(nearest.mean()), "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=60)
    parser.add_argument("--sizes", type=int, nargs="+", default=[12, 48])
    parser.add_argument("--sampler", choices=sorted(SAMPLERS), default="density")
    add_flags(parser, quick="5 seeds, size 12")
    opts = parser.parse_args()
    seeds, sizes = (5, [12]) if opts.quick else (opts.seeds, opts.sizes)
    rows: list[dict[str, Any]] = []
    for name, fails in REGIONS.items():
        for n in sizes:
            ours: list[dict] = []
            base: list[dict] = []
            for seed in range(seeds):  # alternately: ours, then the baseline, per seed
                ours.append(study(seed, n, fails, tell=True, kind=opts.sampler))
                base.append(study(seed, n, fails, tell=False, kind=opts.sampler))
            for key, unit, agg in (("failures", "count", statistics.mean),
                                   ("coverage", "dist", statistics.mean),
                                   ("cpu", "s", statistics.median)):  # fmt: skip
                a, b = agg(r[key] for r in ours), agg(r[key] for r in base)
                case = f"{name}, n={n}: {key}"
                ratio = b / a if a else None  # lower is better: baseline/ours
                rows.append({"case": case, "ours": a, "baseline": b, "unit": unit,
                             "ratio": ratio, "target": None})  # fmt: skip
    title = f"{opts.sampler} replacement draws ({seeds} seeds; busy shared machine: CPU times move)"
    finish(rows, title,
           width=40, as_json=opts.json, seeds=seeds)  # fmt: skip


if __name__ == "__main__":
    main()
