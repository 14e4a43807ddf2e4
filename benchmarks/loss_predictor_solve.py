"""The cost of `LossPredictor.std`'s solve, general LU ("lu", every study's before
2026-12-05) against triangular ("triangular", a new study's since), at the sizes an
acquisition draw of `SurrogateSampler` meets: ``known`` points (every draw remembered,
up to ``memory`` 1000, plus the ``window`` of observed ones, up to 100) against
``pool`` (1024) candidates, in 12 dimensions (the heat benchmark's wide space).

Per size, `--repeats` rounds, each timing both solves (in alternating order) and the
whole `std` of each, on the same factor and candidates; medians of the rounds. Also
how far the two deviations are apart (they round differently: why the sampler keeps
its solve in its state, `launcher.loss_predictor`)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/loss_predictor_solve.py
    python benchmarks/loss_predictor_solve.py --known 48 1100 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from melissa_trainer.launcher.loss_predictor import STD_SOLVES, LossPredictor


def seconds(call: Callable[[np.ndarray], object], argument: np.ndarray) -> float:
    start = time.perf_counter()
    call(argument)
    return time.perf_counter() - start


def measure(known: int, dims: int, pool: int, repeats: int) -> dict[str, float]:
    """Median seconds of each solve's `std` at `known` points, and their largest gap."""
    rng = np.random.default_rng(known)
    points = rng.random((known, dims))
    observed = points[-min(known, 100) :]  # the window: the newest observed
    losses = rng.random(len(observed)) + 0.1
    candidates = rng.random((pool, dims))
    predictors = {
        solve: LossPredictor(observed, losses, points, std_solve=solve) for solve in STD_SOLVES
    }
    times: dict[str, list[float]] = {solve: [] for solve in STD_SOLVES}
    for round_ in range(repeats):
        order = STD_SOLVES if round_ % 2 == 0 else STD_SOLVES[::-1]
        for solve in order:
            times[solve].append(seconds(predictors[solve].std, candidates))
    gap = np.abs(predictors["lu"].std(candidates) - predictors["triangular"].std(candidates))
    out = {solve: statistics.median(ts) for solve, ts in times.items()}
    out["gap"] = float(gap.max())
    start = time.perf_counter()
    LossPredictor(observed, losses, points)
    out["build"] = time.perf_counter() - start
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--known", type=int, nargs="+", default=[48, 100, 300, 600, 1100])
    p.add_argument("--dims", type=int, default=12)
    p.add_argument("--pool", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=9)
    opts = p.parse_args()
    print(f"std of {opts.pool} candidates, {opts.dims} dimensions; medians of {opts.repeats}")
    print(f"{'known':>6}{'lu ms':>10}{'triangular ms':>15}{'lu / tri':>10}"
          f"{'build ms':>10}{'max |gap|':>11}")  # fmt: skip
    for known in opts.known:
        r = measure(known, opts.dims, opts.pool, opts.repeats)
        print(f"{known:>6}{r['lu'] * 1e3:>10.2f}{r['triangular'] * 1e3:>15.2f}"
              f"{r['lu'] / r['triangular']:>10.2f}{r['build'] * 1e3:>10.2f}"
              f"{r['gap']:>11.1e}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
