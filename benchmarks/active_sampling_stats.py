"""The statistics and tables of `active_sampling.py`: per-seed paired ratios (each
baseline's error over ours, Breed's or the surrogate acquisition's, the same seed and
initial weights), their median, wins out of N, a percentile bootstrap interval of that
median, the rows of ``--json`` and the per-seed table.

A run (`Run`) is one study's result: ``sampler`` (an arm), ``seed``, ``uniform_mse``,
``hard_mse`` (K^2), ``hard_share`` and the rest `active_sampling_study.run_study` records;
runs recorded since issue 46 also hold the tails of the per-simulation errors on the
uniform test set, ``uniform_p99`` and ``uniform_max`` (each test simulation's MSE over
its points and steps, K^2: their 99th percentile and their largest).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

Run = dict[str, Any]
#: the arms, in the order they run for each seed: the fixed designs, the control (Breed's
#: settings with exploration 1.0: its gap-filling design alone, no bred draw), Breed
ARMS = ("lhs", "lhs_opt", "sobol", "explore", "breed", "surrogate", "density")
FIXED = ("lhs", "lhs_opt", "sobol")
#: the arms "ours" can be (`--ours`), each with the arms it runs against by default
OURS = {"breed": ("lhs", "lhs_opt", "sobol", "explore", "breed"),
        "surrogate": ("lhs", "lhs_opt", "sobol", "surrogate"),
        "density": ("lhs", "lhs_opt", "sobol", "density")}  # fmt: skip
LABELS = {"lhs": "LHS", "lhs_opt": "LHS, optimised", "sobol": "scrambled Sobol'",
          "explore": "exploration alone", "breed": "Breed",
          "surrogate": "surrogate acquisition", "density": "high-loss density"}  # fmt: skip
#: the surrogate's statistics (issue 46), each a run's key: the uniform set's mean, p99 and
#: max of the per-simulation MSE, the hard set's mean
TAILS = {"mean": "uniform_mse", "p99": "uniform_p99", "max": "uniform_max",
         "hard mean": "hard_mse"}  # fmt: skip
#: the worst cases where an adaptive sampler aims (runs recorded since the hard set's
#: tails were: `tails_of`): the hard set's 90th percentile and largest per-simulation MSE
HARD_TAILS = {"hard p90": "hard_p90", "hard max": "hard_max"}
#: Breed's worst-case statistics (`--ours breed`: its mean rows are `rows`')
WORST = ("p99", "max", "hard p90", "hard max")
#: issue 46's targets, baseline / surrogate: opt-LHS on the tails at 6 and 12 parameters
#: (the interval's low end above 1.0), not worse than 0.97 on the mean; LHS on the
#: walls' mean (today's Breed: 1.90)
TARGET_TAIL, TARGET_TAIL_MEAN, TARGET_WALLS_MEAN = 1.3, 0.97, 1.5
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


def paired(
    runs: list[Run], arm: str, test: str, ours: str = "breed", key: str | None = None
) -> Paired:
    """`arm` / `ours` on `test` (its ``{test}_mse``, or the run's `key`) over the seeds
    where both ran (raises if there is none)."""
    key = key or f"{test}_mse"
    seeds = sorted(s for s, arms in by_seed(runs).items() if arm in arms and ours in arms)
    if not seeds:
        raise ValueError(f"no seed on which both {arm} and {LABELS[ours]} ran")
    table = by_seed(runs)
    ratios = tuple(table[s][arm][key] / table[s][ours][key] for s in seeds)
    return Paired(arm, test, tuple(seeds), ratios)


def baselines(runs: list[Run], ours: str = "breed") -> list[str]:
    """The arms other than `ours` that `runs` hold, in `ARMS` order."""
    return [a for a in ARMS if a != ours and any(r["sampler"] == a for r in runs)]


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


def tails_of(runs: list[Run], only: tuple[str, ...] | None = None) -> dict[str, str]:
    """The statistics (`TAILS`, and `HARD_TAILS` when every run of `runs` holds them:
    runs recorded before have no hard tails) the tables show, as `TAILS` maps them;
    `only`: those of these names (those `runs` lack left out)."""
    every = all(key in r for r in runs for key in HARD_TAILS.values())
    out = {**TAILS, **(HARD_TAILS if every else {})}
    if all("uniform_p99" not in r for r in runs):  # (recorded before issue 46: means only)
        out = {"mean": TAILS["mean"], "hard mean": TAILS["hard mean"]}
    return out if only is None else {k: v for k, v in out.items() if k in only}


def tail_rows(
    runs: list[Run], space: str, ours: str = "surrogate", only: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """The ``--json`` rows of issue 46: for each baseline arm and each of `TAILS` (the
    uniform set's mean, p99 and max per-simulation MSE, the hard set's mean), two rows
    as in `rows` (medians; paired per seed, the interval's ends as ``ours`` and
    ``baseline``). Targets, in the 6- and 12-parameter spaces: optimised LHS / ours
    >= `TARGET_TAIL` on p99 and max (per-seed row: its low end above 1.0), >=
    `TARGET_TAIL_MEAN` on the mean; in the walls space, LHS / ours >=
    `TARGET_WALLS_MEAN` on the mean; against exploration alone (the same explorer, no
    bred draw: what the steering adds), the hard set's p90 and max per seed above 1.0.
    `only`: these statistics (`tails_of`), without the share row. Then the share of
    simulations in the hard region, ours / LHS."""

    def row(case: str, ours_: float, baseline: float, unit: str, ratio: float, target: Any):
        return {"case": case, "ours": round(ours_, 4), "baseline": round(baseline, 4),
                "unit": unit, "ratio": round(ratio, 3), "target": target}  # fmt: skip

    def target(arm: str, stat: str) -> tuple[Any, Any]:
        """(the medians row's target, the per-seed row's)."""
        if arm == "explore" and stat in HARD_TAILS:
            return None, 1.0
        if space == "walls":
            return (TARGET_WALLS_MEAN, 1.0) if (arm, stat) == ("lhs", "mean") else (None, None)
        if arm != "lhs_opt":
            return None, None
        if stat in ("p99", "max"):
            return TARGET_TAIL, 1.0
        return (TARGET_TAIL_MEAN, None) if stat == "mean" else (None, None)

    out: list[dict[str, Any]] = []
    label = LABELS[ours]
    for stat, key in tails_of(runs, only).items():
        for arm in baselines(runs, ours):
            mine, base = median(runs, ours, key), median(runs, arm, key)
            first, second = target(arm, stat)
            name = f"{space}, {stat} per-simulation MSE: {LABELS[arm]} / {label}"
            out.append(row(f"{name}, medians", mine, base, "K^2", base / mine, first))
            pair = paired(runs, arm, stat, ours, key)
            low, high = pair.interval()
            out.append(row(f"{name}, per seed (median, {LEVEL:.0%} interval)", low, high,
                           "ratio", pair.median, second))  # fmt: skip
    if "lhs" in baselines(runs, ours) and only is None:
        share = median(runs, ours, "hard_share"), median(runs, "lhs", "hard_share")
        ratio = share[0] / share[1] if share[1] else float("inf")
        out.append(row(f"{space}, share of simulations in the hard region: {label} / LHS",
                       *share, "share", ratio, None))  # fmt: skip
    return out


def print_tails(
    runs: list[Run], ours: str = "surrogate", only: tuple[str, ...] | None = None
) -> None:
    """Every arm's medians of `tails_of` (`only`: these), then each baseline / ours per
    seed: median ratio, interval, ours' wins out of N."""
    n = len(by_seed(runs))
    shown = tails_of(runs, only)
    print(f"\nmedians of {n} seed(s), per-simulation MSE (K^2): " + " / ".join(shown))
    for arm in ARMS:
        if any(r["sampler"] == arm for r in runs):
            cells = " /".join(f"{median(runs, arm, key):>9.3f}" for key in shown.values())
            print(f"  {LABELS[arm]:<24}{cells}; {median(runs, arm, 'hard_share'):.1%} hard")
    print(f"\npaired per seed, baseline / {LABELS[ours]} (> 1: ours better): median "
          f"[{LEVEL:.0%} bootstrap interval, {RESAMPLES} resamples], ours' wins of N")  # fmt: skip
    for stat, key in shown.items():
        for arm in baselines(runs, ours):
            pair = paired(runs, arm, stat, ours, key)
            low, high = pair.interval()
            print(f"  {stat:<10}{LABELS[arm]:<20}{pair.median:>6.2f} [{low:.2f}, {high:.2f}]"
                  f"  {pair.wins}/{len(pair.ratios)}")  # fmt: skip
