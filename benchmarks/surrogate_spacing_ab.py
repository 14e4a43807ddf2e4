"""The surrogate acquisition's `spacing` option, A/B on the worst cases: the studies of
`active_sampling.py` (the heat problem, 48 simulations, a real `Launcher` and `Study`
each) with ``spacing`` 0 (the default: the baseline) against ``--spacing`` (ours),
every other option at its default, judged on the per-simulation error of held-out test
simulations: the uniform set's mean, p99 and max, and the hard region's max.

Rounds are interleaved: for each seed, both arms, the order alternating (spacing 0
first on even seeds), each study in its own process (`active_sampling.py --arms
surrogate --seeds 1`), recorded in `--results` (a run already there is reused, so a cut
run resumes). Reported per metric: each arm's median over the seeds, and the median of
the per-seed ratios spacing 0 / ours (higher is better: ours errs less) with ours' wins
of N. Evaluation seeds (from 1000) by default: the spacing value is chosen before the
run, never on them.

    python benchmarks/surrogate_spacing_ab.py --space full --spacing 0.1 --seeds 10
    python benchmarks/surrogate_spacing_ab.py --space wide --spacing 0.1 --seeds 6 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import active_sampling as bench  # noqa: E402
import active_sampling_keys as keys  # noqa: E402
from report import add_flags, finish  # noqa: E402

HERE = Path(__file__).resolve().parent
#: the judged metrics: (the run's key, the row's name)
METRICS = (("uniform_mse", "mean"), ("uniform_p99", "p99"), ("uniform_max", "max"),
           ("hard_max", "hard max"))  # fmt: skip


def options(spacing: float) -> str:
    """The `--surrogate` JSON of an arm: the spacing alone, named (`active_sampling.py`
    keys spacing 0 as the runs recorded before it was an option)."""
    return json.dumps({"spacing": spacing})


def run(space: str, seed: int, spacing: float, steps: int, results: Path, out: Path) -> None:
    """One study (reused when `results` holds it)."""
    command = [sys.executable, str(HERE / "active_sampling.py"), "--ours", "surrogate",
               "--arms", "surrogate", "--space", space, "--steps", str(steps),
               "--first_seed", str(seed), "--seeds", "1", "--surrogate", options(spacing),
               "--output_dir", str(out / f"spacing-{spacing}"),
               "--results", str(results)]  # fmt: skip
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def recorded(results: Path, space: str, steps: int) -> dict[tuple[str, int], dict[str, Any]]:
    """The surrogate runs in `results` of this space and steps: {(fingerprint, seed): run}."""
    out = {}
    for line in results.read_text().splitlines() if results.exists() else []:
        r = json.loads(line)
        if r.get("sampler") == "surrogate" and r["space"] == space and r["steps"] == steps:
            out[(r["fingerprint"], r["seed"])] = r
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--space", default="full", choices=["walls", "full", "wide"])
    p.add_argument("--spacing", type=float, default=0.1, help="ours (the baseline: 0)")
    p.add_argument("--seeds", type=int, default=10, help="how many, from --first_seed")
    p.add_argument("--first_seed", type=int, default=1000)
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--results", type=Path, default=Path("outputs/surrogate_spacing_ab.jsonl"))
    add_flags(p, quick="2 seeds of 400 steps (still 48 simulations): no figures")
    opts = p.parse_args()
    n_seeds, steps = (2, 400) if opts.quick else (opts.seeds, opts.steps)
    seeds = list(range(opts.first_seed, opts.first_seed + n_seeds))
    out = opts.results.parent
    out.mkdir(parents=True, exist_ok=True)
    arms = (0.0, opts.spacing)
    for seed in seeds:
        for spacing in arms if seed % 2 == 0 else arms[::-1]:
            run(opts.space, seed, spacing, steps, opts.results, out)
            print(f"seed {seed} spacing {spacing}: done", file=sys.stderr, flush=True)
    runs = recorded(opts.results, opts.space, steps)
    arm = {spacing: {s: runs[(key(opts.space, spacing, steps), s)] for s in seeds}
           for spacing in arms}  # fmt: skip
    rows = []
    for metric, name in METRICS:
        base = [arm[0.0][s][metric] for s in seeds]
        ours = [arm[opts.spacing][s][metric] for s in seeds]
        ratios = [b / o for b, o in zip(base, ours, strict=True)]
        wins = sum(r > 1 for r in ratios)
        rows.append({"case": f"{opts.space}, spacing {opts.spacing} vs 0: {name} (wins "
                             f"{wins}/{len(seeds)})",
                     "ours": statistics.median(ours), "baseline": statistics.median(base),
                     "unit": "K^2", "ratio": statistics.median(ratios), "target": 1.0})  # fmt: skip
    title = f"surrogate spacing A/B, {opts.space}, seeds {seeds[0]}-{seeds[-1]}, {steps} steps"
    per_seed = {name: {str(a): [arm[a][s][metric] for s in seeds] for a in arms}
                for metric, name in METRICS}  # fmt: skip
    finish(rows, title, width=60, as_json=opts.json, seeds=seeds, per_seed=per_seed)


def key(space: str, spacing: float, steps: int) -> str:
    """The fingerprint `active_sampling.py` records an arm's runs under (`run`'s setup)."""
    setup = bench.Setup(space=space, steps=steps, surrogate=json.loads(options(spacing)))
    return keys.fingerprint(setup, 200, 100, "surrogate")


if __name__ == "__main__":
    main()
