"""The tuning tables of issue 31: Breed's candidate settings on the **tuning seeds** (below
1000) of `active_sampling.py`, from the runs recorded in `--results`. Runs nothing.

**Second round** (`CANDIDATES`, seeds 0-4), each candidate against main's Breed (the
settings the first evaluation ran with).

Each candidate is an arm of `active_sampling.py` run with some ``--breed`` options:
the "breed" arm (the options as given) or the "explore" arm (the same with exploration
1.0: the exploration design alone). Reported per space: every seed's uniform / hard
MSE, the medians, and per seed the ratio candidate / main's Breed (below 1: the
candidate better), its median, the candidate's wins out of N and the bootstrap interval
of the median (`active_sampling_stats`). The runs were made by::

    cd benchmarks/results
    python ../active_sampling.py --space SPACE --first_seed SEED --seeds 1 --arms explore breed \\
        --breed OPTIONS --results active_sampling_tuning_SPACE.jsonl

for SPACE walls and full, SEED 0-4, OPTIONS each of `CANDIDATES`' (main's, and with
``"explorer": "lhs"``).

**Third round** (`THIRD`, full space, fresh seeds 300-304): the second round's choice
(Sobol' gap-filling, exploring alone) lost to the optimised Latin hypercube in the full
space on the evaluation seeds, so each candidate explorer is measured against that
fixed design (the "lhs_opt" arm), per seed the ratio lhs_opt / candidate as in the
benchmark (above 1: the candidate better). The runs were made by::

    cd benchmarks/results
    python ../active_sampling.py --space full --first_seed SEED --seeds 1 \\
        --arms lhs_opt breed --breed OPTIONS --results active_sampling_tuning3_full_a.jsonl

for SEED 300-302 with the options of the LHS gap-filling candidate, and the same with
``--arms breed`` and the other two candidates' options into
``active_sampling_tuning3_full_b.jsonl`` (two jobs at a time, under ``nice``; seeds
303-304 were planned, and the LHS gap-filling candidate's seed 302 cut, when the time
set aside for tuning ran out). Usage::

    cd benchmarks/results
    python ../active_sampling_tuning.py --results active_sampling_tuning*.jsonl
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import active_sampling as bench  # noqa: E402
import active_sampling_keys as keys  # noqa: E402
import active_sampling_stats as stats  # noqa: E402

#: main's Breed: the options the first runs were recorded with (its explorer "sobol",
#: then the default and unnamed in them)
MAIN = {**keys.RECORDED_BREED, "explorer": "sobol"}
#: (label, arm, --breed options): the first is the reference, main's Breed
CANDIDATES = (
    ("main's Breed (Sobol' maximin, exploration 0.7)", "breed", MAIN),
    ("its exploration alone (Sobol' maximin)", "explore", MAIN),
    ("Breed, LHS exploration, 0.7", "breed", {**MAIN, "explorer": "lhs"}),
    ("LHS exploration alone", "explore", {**MAIN, "explorer": "lhs"}),
)


def table(results: list[Path], space: str, n_test: int, n_hard: int) -> None:
    runs: dict[str, dict[int, stats.Run]] = {}
    for label, kind, options in CANDIDATES:
        setup = bench.Setup(space=space, breed=options)
        key = keys.fingerprint(setup, n_test, n_hard, kind)
        found = keys.recorded(results, {kind: key})
        runs[label] = {seed: run for (_, seed), run in found.items() if seed < 1000}
    reference = CANDIDATES[0][0]
    seeds = sorted(set.intersection(*(set(r) for r in runs.values())))
    print(f"\n{space} space, tuning seeds {seeds} (every candidate ran them): "
          f"uniform / hard MSE (K^2); share in the hard region")  # fmt: skip
    for seed in seeds:
        cells = [f"{runs[c[0]][seed]['uniform_mse']:.3f} / {runs[c[0]][seed]['hard_mse']:.3f}; "
                 f"{runs[c[0]][seed]['hard_share']:.0%}" for c in CANDIDATES]  # fmt: skip
        print(f"  {seed:<4}" + "  ".join(f"{c:<26}" for c in cells))
    if not seeds:
        return
    print(f"  candidate / {reference} per seed (< 1: the candidate better): median "
          f"[95% interval], the candidate's wins")  # fmt: skip
    for label, _, _ in CANDIDATES:
        mine = [runs[label][s] for s in seeds]
        medians = [statistics.median(r[f"{t}_mse"] for r in mine) for t in stats.SETS]
        line = f"  {label:<50} medians {medians[0]:.3f} / {medians[1]:.3f};"
        for test in stats.SETS:
            ratios = tuple(runs[label][s][f"{test}_mse"] / runs[reference][s][f"{test}_mse"]
                           for s in seeds)  # fmt: skip
            pair = stats.Paired(label, test, tuple(seeds), ratios)
            low, high = pair.interval()
            wins = sum(r < 1.0 for r in ratios)
            line += f"  {test} {pair.median:.2f} [{low:.2f}, {high:.2f}] {wins}/{len(seeds)}"
        print(line)


#: the third round's tuning seeds (none used before: rounds one and two ran 0-4, the
#: issue's held-out checks 100-102 and 200-205; 300-302 ran)
THIRD_SEEDS = tuple(range(300, 305))
#: Breed's options in the third round, but the explorer and its candidates
EXPLORE_ALONE = {"exploration": 1.0, "sigma": 0.15, "floor": 0.5, "min_observations": 8}
#: (label, arm, --breed options): the first is the reference, the optimised Latin hypercube
THIRD = (
    ("LHS, optimised (the fixed design)", "lhs_opt", {}),
    ("Sobol' gap-filling (the second round's default)", "breed",
     {**EXPLORE_ALONE, "candidates": 16, "explorer": "sobol"}),
    ("LHS exploration, gap-filling order (16)", "breed",
     {**EXPLORE_ALONE, "candidates": 16, "explorer": "lhs"}),
    ("LHS exploration, the design's order (1)", "breed",
     {**EXPLORE_ALONE, "candidates": 1, "explorer": "lhs"}),
)  # fmt: skip


def third(results: list[Path], n_test: int, n_hard: int) -> None:
    """The third round's table: full space, `THIRD` on `THIRD_SEEDS`, each candidate
    against the optimised Latin hypercube (lhs_opt / candidate, above 1: the candidate
    better)."""
    runs: dict[str, dict[int, stats.Run]] = {}
    for label, kind, options in THIRD:
        setup = bench.Setup(space="full", breed=options)
        key = keys.fingerprint(setup, n_test, n_hard, kind)
        found = keys.recorded(results, {kind: key})
        runs[label] = {seed: run for (_, seed), run in found.items() if seed in THIRD_SEEDS}
    reference = THIRD[0][0]
    seeds = sorted(set.union(*(set(r) for r in runs.values())))
    print(f"\nthird round, full space, tuning seeds {seeds}: uniform / hard MSE (K^2); "
          f"share in the hard region (-: not run)")  # fmt: skip
    for label, _, _ in THIRD:
        cells = [f"{runs[label][s]['uniform_mse']:.1f} / {runs[label][s]['hard_mse']:.1f}; "
                 f"{runs[label][s]['hard_share']:.0%}" if s in runs[label] else "-"
                 for s in seeds]  # fmt: skip
        print(f"  {label:<50}" + "  ".join(f"{c:<20}" for c in cells))
    print(f"  {reference} / candidate per seed, over the seeds both ran (> 1: the candidate "
          f"better): median [95% interval], the candidate's wins")  # fmt: skip
    for label, _, _ in THIRD[1:]:
        both = [s for s in seeds if s in runs[label] and s in runs[reference]]
        if not both:
            continue
        mine = [runs[label][s] for s in both]
        medians = [statistics.median(r[f"{t}_mse"] for r in mine) for t in stats.SETS]
        line = f"  {label:<50} seeds {both}: medians {medians[0]:.1f} / {medians[1]:.1f};"
        for test in stats.SETS:
            ratios = tuple(runs[reference][s][f"{test}_mse"] / runs[label][s][f"{test}_mse"]
                           for s in both)  # fmt: skip
            pair = stats.Paired(label, test, tuple(both), ratios)
            low, high = pair.interval()
            line += f"  {test} {pair.median:.2f} [{low:.2f}, {high:.2f}] {pair.wins}/{len(both)}"
        print(line)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--results", nargs="+", required=True, metavar="FILE")
    p.add_argument("--test", type=int, default=200)
    p.add_argument("--test_hard", type=int, default=100)
    opts = p.parse_args()
    results = [Path(f) for f in opts.results]
    for space in ("walls", "full"):
        table(results, space, opts.test, opts.test_hard)
    third(results, opts.test, opts.test_hard)


if __name__ == "__main__":
    main()
