"""The statistics and tables of `active_sampling.py`: per-seed paired ratios (each
baseline's error over Breed's, the same seed and initial weights), their median, wins
out of N, a percentile bootstrap interval of that median, the rows of ``--json`` and the
per-seed table.

A run (`Run`) is one study's result: ``sampler`` (an arm), ``seed``, ``uniform_mse``,
``hard_mse`` (K^2), ``hard_share`` and the rest `active_sampling.run_study` records.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

Run = dict[str, Any]
#: the arms, in the order they run for each seed: the fixed designs, the control (Breed's
#: settings with exploration 1.0: its gap-filling design alone, no bred draw), Breed
ARMS = ("lhs", "lhs_opt", "sobol", "explore", "breed")
FIXED = ("lhs", "lhs_opt", "sobol")
LABELS = {"lhs": "LHS", "lhs_opt": "LHS, optimised", "sobol": "scrambled Sobol'",
          "explore": "exploration alone", "breed": "Breed"}  # fmt: skip
SETS = ("uniform", "hard")
TARGET_UNIFORM = 1.2
RESAMPLES = 2000  # bootstrap resamples of the seeds
LEVEL = 0.95  # the interval's coverage (percentile bootstrap)


@dataclass(frozen=True)
class Paired:
    """One baseline arm against Breed on one test set, over the seeds both ran."""

    arm: str
    test: str  # "uniform" or "hard"
    seeds: tuple[int, ...]
    ratios: tuple[float, ...]  # baseline MSE / Breed MSE per seed (> 1: Breed better)

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def wins(self) -> int:
        """Seeds on which Breed's error is below the baseline's."""
        return sum(r > 1.0 for r in self.ratios)

    def interval(self, resamples: int = RESAMPLES, level: float = LEVEL) -> tuple[float, float]:
        """Percentile bootstrap interval of the median ratio: the seeds resampled with
        replacement `resamples` times (a fixed generator: the same runs give the same
        interval)."""
        ratios = np.asarray(self.ratios)
        rng = np.random.default_rng(12345)
        picks = rng.integers(0, len(ratios), size=(resamples, len(ratios)))
        medians = np.median(ratios[picks], axis=1)
        tail = 100.0 * (1.0 - level) / 2.0
        low, high = np.percentile(medians, [tail, 100.0 - tail])
        return float(low), float(high)


def by_seed(runs: list[Run]) -> dict[int, dict[str, Run]]:
    """``{seed: {arm: run}}``."""
    out: dict[int, dict[str, Run]] = {}
    for r in runs:
        out.setdefault(int(r["seed"]), {})[r["sampler"]] = r
    return out


def paired(runs: list[Run], arm: str, test: str) -> Paired:
    """`arm` / Breed on `test` over the seeds where both ran (raises if there is none)."""
    seeds = sorted(s for s, arms in by_seed(runs).items() if arm in arms and "breed" in arms)
    if not seeds:
        raise ValueError(f"no seed on which both {arm} and Breed ran")
    table = by_seed(runs)
    ratios = tuple(table[s][arm][f"{test}_mse"] / table[s]["breed"][f"{test}_mse"] for s in seeds)
    return Paired(arm, test, tuple(seeds), ratios)


def baselines(runs: list[Run]) -> list[str]:
    """The arms other than Breed that `runs` hold, in `ARMS` order."""
    return [a for a in ARMS if a != "breed" and any(r["sampler"] == a for r in runs)]


def median(runs: list[Run], arm: str, key: str) -> float:
    return statistics.median(r[key] for r in runs if r["sampler"] == arm)


def rows(runs: list[Run], space: str) -> list[dict[str, Any]]:
    """The ``--json`` rows. For each baseline arm and test set, two rows:

    - medians: ``ours`` Breed's median MSE, ``baseline`` the arm's, ``ratio`` baseline /
      ours (higher: Breed better); target 1.2 for LHS on the uniform set, LHS's uniform
      ratio for LHS on the hard set (the issue's "higher on the hard region");
    - paired per seed: ``ratio`` the median of the per-seed ratios baseline / Breed,
      ``ours`` and ``baseline`` the low and high ends of its bootstrap interval (unit
      "ratio"); target 1.0 for LHS on the uniform set (the low end must exceed it), else
      None.

    Then (when LHS ran) the share of simulations in the hard region, ``ours`` Breed,
    ``baseline`` LHS, ``ratio`` ours / baseline."""

    def row(case: str, ours: float, baseline: float, unit: str, ratio: float, target: Any):
        return {"case": case, "ours": round(ours, 4), "baseline": round(baseline, 4),
                "unit": unit, "ratio": round(ratio, 3), "target": target}  # fmt: skip

    out: list[dict[str, Any]] = []
    uniform_lhs = 0.0
    for test in SETS:
        for arm in baselines(runs):
            ours, base = median(runs, "breed", f"{test}_mse"), median(runs, arm, f"{test}_mse")
            target: Any = None
            if arm == "lhs":
                target = TARGET_UNIFORM if test == "uniform" else round(uniform_lhs, 3)
            name = f"{space}, {test} MSE: {LABELS[arm]} / Breed"
            out.append(row(f"{name}, medians", ours, base, "K^2", base / ours, target))
            if arm == "lhs" and test == "uniform":
                uniform_lhs = base / ours
            pair = paired(runs, arm, test)
            low, high = pair.interval()
            out.append(row(f"{name}, per seed (median, {LEVEL:.0%} interval)", low, high,
                           "ratio", pair.median,
                           1.0 if arm == "lhs" and test == "uniform" else None))  # fmt: skip
    if "lhs" not in baselines(runs):
        return out
    share = median(runs, "breed", "hard_share"), median(runs, "lhs", "hard_share")
    out.append(row(f"{space}, share of simulations in the hard region: Breed / LHS", *share,
                   "share", share[0] / share[1] if share[1] else float("inf"), None))  # fmt: skip
    return out


def print_paired(runs: list[Run]) -> None:
    """Medians of every arm, then each baseline / Breed per seed: median ratio, interval,
    wins out of N."""
    n = len(by_seed(runs))
    print(f"\nmedians of {n} seed(s): uniform / hard MSE (K^2); share in the hard region")
    for arm in ARMS:
        if any(r["sampler"] == arm for r in runs):
            print(f"  {LABELS[arm]:<20}{median(runs, arm, 'uniform_mse'):>9.3f} /"
                  f"{median(runs, arm, 'hard_mse'):>8.3f}; "
                  f"{median(runs, arm, 'hard_share'):.1%}")  # fmt: skip
    print(
        f"\npaired per seed, baseline / Breed (> 1: Breed better): median "
        f"[{LEVEL:.0%} bootstrap interval, {RESAMPLES} resamples], Breed's wins of N"
    )
    for test in SETS:
        for arm in baselines(runs):
            pair = paired(runs, arm, test)
            low, high = pair.interval()
            print(f"  {test:<8}{LABELS[arm] + ' / Breed':<28}{pair.median:>6.2f} "
                  f"[{low:.2f}, {high:.2f}]  {pair.wins}/{len(pair.ratios)}")  # fmt: skip


def print_seeds(runs: list[Run]) -> None:
    """Every seed's figures: each arm's uniform / hard MSE and hard share."""
    arms = [a for a in ARMS if any(r["sampler"] == a for r in runs)]
    print("\nper seed: uniform / hard MSE (K^2), share of simulations in the hard region")
    print("seed  " + "".join(f"{LABELS[a]:<24}" for a in arms))
    for seed, table in sorted(by_seed(runs).items()):
        cells = [
            f"{table[a]['uniform_mse']:.3f} / {table[a]['hard_mse']:.3f}; "
            f"{table[a]['hard_share']:.0%}"
            if a in table
            else "-"
            for a in arms
        ]
        print(f"{seed:<6}" + "".join(f"{c:<24}" for c in cells))
