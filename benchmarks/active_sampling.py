"""Active sampling on the heat equation: fixed designs (a Latin hypercube, an optimised
one, scrambled Sobol') against the adaptive Breed sampler, with the same simulation
budget and the same training steps (issues 20 and 31), and Breed's exploration alone as
the control that says what the breeding adds (the same as Breed since Breed's default
explores only: issue 31's second round).

The problem (the heat example's solver with the diffusivity ``log2_alpha`` as a
parameter; its hard region, fast diffusion) and its spaces, ``--space walls`` (default,
3 parameters), ``full`` (6) and ``wide`` (12): `heat_problem`. One study (the arms'
samplers, the study itself, its held-out figures): `active_sampling_study`.

Each run is a real study: the `Launcher` runs the solver processes (one at a time), a
`Study` streams them into `OnlineTrainer`: an MLP (parameters, sqrt(t) -> field; 3
hidden layers of 128), batch 32, Adam with a cosine decay over exactly `--steps` steps,
a reservoir that keeps every sample. The buffer's sample-to-insert ratio (tolerance:
the least allowed) paces the simulations to the training, so that they arrive over the
first `--stream_share` of the steps, each drawn knowing the losses so far; the rest of
the steps replay the reservoir. The study feeds Breed every simulation's relative
training loss (every 20 steps). Same seed, initial weights and steps for every arm of a
seed; every simulation of the budget must finish.

The arms (`ARMS`, in this order for the first seed, reversed for the second, and so on:
A B, B A, ...), each arm's options checked before any study runs: **LHS** (scipy's
plain random Latin hypercube, the library's "lhs"); **LHS, optimised** (``qmc.LatinHypercube(
optimization="random-cd")``) and **scrambled Sobol'** (its first 48 points), both over
the varying parameters only; **exploration alone**, Breed's settings with exploration
1.0 (its gap-filling design, no bred draw: the losses are fed but unused); **Breed**
(`--breed`, JSON of `make_sampler("breed", ...)` options; unnamed ones take
BreedSampler's defaults: exploration 1.0, sigma 0.15, floor 0.5, min_observations 8,
explorer "auto", candidates None; `BREED`). "auto" explores the walls space (3
parameters) with the gap-filling Sobol' sequence (16 candidates) and the full space (6)
with the optimised Latin hypercube of the 48 draws in its order: there the draws of
the "LHS, optimised" arm, the same points in the same order (numpy seeds them alike).
`--arms` runs (or reports) some of them. **Surrogate** (issue 46, ``--ours
surrogate``; `--surrogate`, JSON of `SurrogateSampler`'s options, none named by default:
exploration 0.5, kappa 1, pool 1024, noise 0.1, chosen before any run, not tuned;
spacing 0.1 since 2026-12-02, 0 in every run recorded before: `fingerprint`): half
its draws gap-filling Sobol', half where a Gaussian-process predictor of the observed
relative losses, their launch-order trend removed, puts the highest upper confidence
bound. With ``--ours surrogate`` the default arms are the three fixed designs and the
surrogate, and the tables are issue 46's: per arm the uniform set's mean, p99 and max of
the per-simulation MSE (each test simulation's MSE over its points and steps) and the
hard set's mean, each paired per seed as baseline / surrogate with its interval
(`active_sampling_stats.tail_rows`, which names the targets: optimised LHS / surrogate
>= 1.3 on p99 and max at 6 and 12 parameters with the interval above 1.0, >= 0.97 on the
mean; LHS / surrogate >= 1.5 on the walls' mean). A run recorded without the tails
(before issue 46) is run again. The surrogate's runs also record ``sampler_seconds``,
the time its draws and observations took inside the study.

**High-loss density** (issue 46's second round, ``--ours density``; `--density`, JSON
of `DensitySampler`'s options, none named by default: its defaults, chosen on tuning
seeds 0-4 with `active_sampling_fast.py`): the optimised Latin hypercube of the budget,
each parameter's marginal Beta(0.7, 0.7), warped towards the top quarter of the observed
losses on the parameters whose rank correlation with the loss is strong; from 7 varying
parameters (the wide space), a draw inside that region takes the other parameters
nearer their bounds (``contrast`` "auto": 0.25; issue 46's fourth round). Measured (10
evaluation seeds, 4,000 steps; docs/measured.md), optimised LHS / density: full, mean
1.04 [1.00, 1.17], p99 1.43 [1.33, 1.63], max 1.22 [1.04, 1.93]; wide, mean 0.91 [0.86,
0.99], p99 0.92 [0.84, 1.07], max 1.02 [0.89, 1.19].

**Seeds.** Seeds from `EVALUATION_FIRST_SEED` (1000, the default `--first_seed`) are
evaluation seeds, never used to choose a Breed setting (the surrogate acquisition's
``spacing`` 0.1 was chosen on 1000-1009: its later claims are judged on 3000+ and 5000+),
with their own test sets (seeds 20000, 20001); seeds below it are tuning seeds (test
sets 10000, 10001). BreedSampler's defaults were chosen on tuning seeds
(`active_sampling_tuning.py`); a run mixing the two is refused.

Measured: the MSE (K^2, every point of every step) on `--test` simulations drawn
uniformly over the space and `--test_hard` inside the hard region, solved once in this
process; and the share of each arm's simulations in the hard region. Each run in its
own process, appended to `--results` (JSON lines) as it finishes; a run already there
with the same setup is reused, so a cut run resumes and a finished one reprints its
tables at no cost. Reported: every seed's figures; medians; per seed the ratio
baseline / Breed (same seed, same initial weights; > 1: Breed better), its median,
Breed's wins out of N and a percentile bootstrap interval of that median (2000
resamples of the seeds, 95%). Targets (issues 20 and 31), on the evaluation seeds:
walls space, LHS / Breed >= 1.2 on the uniform set with the interval above 1.0, higher
on the hard set; both spaces, no fixed design's interval below 1.0.

Measured (evaluation seeds, Breed's current default: exploration alone, explorer
"auto"; walls 10 seeds, full 10; docs/measured.md has every seed, all three rounds, and
the runs are in benchmarks/results/), medians of the per-seed ratios baseline / Breed,
uniform / hard [95% intervals]: walls, LHS 1.90 [1.57, 2.45], 10/10 / 2.79, optimised
LHS 1.37 [1.12, 1.80], 10/10 / 1.98, Sobol' 1.28 [1.14, 1.47], 10/10 / 1.92; full, LHS
1.58 [1.16, 2.14], 10/10 / 1.51, optimised LHS 1.00 [0.98, 1.00], 4/10 / 1.00 (the same
draws: a tie), Sobol' 1.69 [1.17, 2.92], 10/10 / 2.01.

    python benchmarks/active_sampling.py                 # walls, evaluation seeds 1000-1009
    python benchmarks/active_sampling.py --space full    # all five temperatures vary
    python benchmarks/active_sampling.py --first_seed 0 --seeds 5   # the tuning seeds
    python benchmarks/active_sampling.py --plot where.png --json   # PNG; last line {"rows": [...]}
    python benchmarks/active_sampling.py --quick         # tiny: checks the pipeline, no figures
    python benchmarks/active_sampling.py --ours surrogate --space wide --steps 4000 \
        --arms lhs_opt surrogate          # issue 46's evaluation (docs/measured.md)
    python benchmarks/active_sampling.py --ours density --space wide --steps 4000 \
        --arms lhs_opt density            # issue 46's second round
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import active_sampling_stats as stats  # noqa: E402
from active_sampling_keys import (  # noqa: E402
    EVALUATION_FIRST_SEED,
    TEST_SEEDS,
    fingerprint,
    phase,
    recorded,
)
from active_sampling_plot import plot  # noqa: E402
from active_sampling_stats import ARMS, Run  # noqa: E402
from active_sampling_study import (  # noqa: E402, F401  (re-exported, as below)
    check_arms,
    fixed_design,
    make_arm,
    run_study,
    tails,
)
from heat_problem import (  # noqa: E402, F401  (re-exported: the other benchmarks read them here)
    BREED,
    DENSITY,
    HARD_FROM,
    LOG2_ALPHA,
    NAMES,
    SPACES,
    SURROGATE,
    WALLS,
    WIDE_NAMES,
    Setup,
    features,
    hard_bounds,
    make_model,
    memory_samples,
    target,
    test_set,
)
from report import add_flags, print_json, print_rows  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402


def child(setup: Setup, kind: str, seed: int, workdir: Path, tests: Path) -> Run:
    """`run_study` in a fresh process (its own Accelerate state, threads and allocator)."""
    spec = {"setup": asdict(setup), "kind": kind, "seed": seed, "workdir": str(workdir),
            "tests": str(tests)}  # fmt: skip
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"{kind} seed {seed} failed (exit {out.returncode}):\n"
                           f"{out.stderr[-4000:]}")  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_child(spec_text: str) -> None:
    """In the child: one study, its `Run` printed as the last line."""
    spec = json.loads(spec_text)
    setup = Setup(**spec["setup"])
    run = run_study(setup, spec["kind"], spec["seed"], Path(spec["workdir"]), Path(spec["tests"]))
    print(json.dumps(run))


def measure(
    setup: Setup,
    seeds: list[int],
    n_test: int,
    n_hard: int,
    work: Path,
    results: list[Path],
    inline: bool = False,
    report_only: bool = False,
    arms: tuple[str, ...] = ARMS,
    need_tails: bool = False,
) -> list[Run]:
    """The studies, the `ARMS` in turn for each seed (in `ARMS` order on the first
    seed, reversed on the second, and so on), each in a child process (`inline`:
    in this one, as --quick does, to save the start of processes that import torch: no
    figure of it is meant to be read). A run already in one of the `results` files with
    this setup is reused, each new one appended to the first as soon as it finishes (a
    cut run resumes; parallel invocations on other seeds, each with its own file, are
    read together). `report_only`: no study runs, the recorded ones are returned. `arms`:
    only these run (or are reported), in `ARMS` order. The test sets of each phase are
    solved once, here, from that phase's seeds. `need_tails`: a recorded run without
    the per-simulation tails (recorded before issue 46) is run again."""
    keys = {kind: fingerprint(setup, n_test, n_hard, kind) for kind in ARMS}
    done = recorded(results, keys)
    if need_tails:
        done = {key: run for key, run in done.items() if "uniform_p99" in run}
    hard_volume = (LOG2_ALPHA[1] - HARD_FROM) / (LOG2_ALPHA[1] - LOG2_ALPHA[0])
    print(f"hard region: log2_alpha >= {HARD_FROM:g}, {hard_volume:.0%} of the space; "
          f"{setup.simulations} simulations, {setup.steps} steps per study; "
          f"{len(done)} run(s) recorded in {', '.join(map(str, results))}\n"
          f"{'sampler':<8}{'seed':>5}{'uniform K^2':>13}{'hard K^2':>11}{'hard share':>12}"
          f"{'steps':>8}{'wall s':>8}  Breed: explored / observed / reductions",
          flush=True)  # fmt: skip
    tests: dict[str, Path] = {}
    runs = []
    for index, seed in enumerate(seeds):
        # the arms interleaved by seed, their order reversed on every other seed: a
        # drift of the machine's load over a round favours no arm (A B, B A, ...)
        order = [a for a in ARMS if a in arms]
        for kind in order if index % 2 == 0 else order[::-1]:
            if (kind, seed) in done:
                run = done[kind, seed]
            elif report_only:
                continue
            else:
                name = phase(seed)
                if name not in tests:
                    tests[name] = test_sets(setup, n_test, n_hard, TEST_SEEDS[name], work)
                workdir = work / f"{kind}-{seed}"
                if inline:  # the trainer's console lines, as a child's, are not shown
                    with contextlib.redirect_stdout(io.StringIO()):
                        run = run_study(setup, kind, seed, workdir, tests[name])
                else:
                    run = child(setup, kind, seed, workdir, tests[name])
                run.update(space=setup.space, phase=name, fingerprint=keys[kind])
                with results[0].open("a") as f:
                    f.write(json.dumps(run) + "\n")
            print_run(run)
            runs.append(run)
    return runs


def test_sets(setup: Setup, n_test: int, n_hard: int, seeds: tuple[int, int], work: Path) -> Path:
    """The uniform and hard-region test sets, drawn with `seeds`, solved and saved."""
    path, arrays = work / f"tests-{seeds[0]}.npz", dict[str, Any]()  # Any: numpy's stub
    for name, bounds, n, seed in (("uniform", setup.bounds, n_test, seeds[0]),
                                  ("hard", hard_bounds(setup), n_hard, seeds[1])):  # fmt: skip
        arrays[f"{name}_x"], arrays[f"{name}_y"] = test_set(setup, bounds, n, seed)
    np.savez(path, **arrays)
    return path


def print_run(r: Run) -> None:
    extra = (f"  {r['explored']} / {r['observed']} / {r['reductions']}"
             if "explored" in r else "")  # fmt: skip
    print(f"{r['sampler']:<8}{r['seed']:>5}{r['uniform_mse']:>13.3f}{r['hard_mse']:>11.3f}"
          f"{r['hard_share']:>12.3f}{r['steps']:>8}{r['wall']:>8.1f}{extra}",
          flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--space", choices=sorted(SPACES), default="walls")
    p.add_argument("--seeds", type=int, default=None, help="how many (default 10; --quick 1)")
    p.add_argument("--first_seed", type=int, default=EVALUATION_FIRST_SEED,
                   help=f"evaluation seeds from {EVALUATION_FIRST_SEED} (default); below "
                        f"it, tuning seeds (the only ones to choose settings on)")  # fmt: skip
    p.add_argument("--simulations", type=int, default=None, help="per study (default 48)")
    p.add_argument("--steps", type=int, default=None, help="per study (default 10,000)")
    p.add_argument("--stream_share", type=float, default=0.7)
    p.add_argument("--test", type=int, default=200, help="uniform test simulations")
    p.add_argument("--test_hard", type=int, default=100, help="hard-region test simulations")
    p.add_argument("--breed", default=json.dumps(BREED), help="JSON of Breed's options")
    p.add_argument("--surrogate", default=json.dumps(SURROGATE),
                   help="JSON of the surrogate acquisition's options")  # fmt: skip
    p.add_argument("--density", default=json.dumps(DENSITY),
                   help="JSON of the high-loss density arm's options")  # fmt: skip
    p.add_argument("--ours", choices=sorted(stats.OURS), default="breed",
                   help="the arm the others are compared with: breed (issues 20 and 31) "
                        "or surrogate (issue 46: the per-simulation tails)")  # fmt: skip
    p.add_argument("--output_dir", default="outputs/active_sampling")
    p.add_argument(
        "--results",
        metavar="FILE",
        nargs="+",
        help="JSON lines, one run each: every run recorded in them is reused, "
        "each new one appended to the first (default OUTPUT_DIR/runs.jsonl)",
    )
    p.add_argument("--report", action="store_true",
                   help="run nothing: the tables of the recorded runs, over the seeds on "
                        "which every arm ran")  # fmt: skip
    p.add_argument("--arms", nargs="+", choices=ARMS, default=None,
                   help="run (or report) only these arms; the tables need ours (default: "
                        "with --ours breed the fixed designs, exploration alone and Breed; "
                        "with --ours surrogate the fixed designs and the surrogate)")  # fmt: skip
    p.add_argument("--plot", metavar="PATH", help="write a PNG of where each put its simulations")
    add_flags(p, quick="tiny sizes: checks, no figures")
    p.add_argument("--child", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        return run_child(opts.child)
    options = {}
    for flag in ("breed", "surrogate", "density"):
        try:
            options[flag] = json.loads(getattr(opts, flag))
        except json.JSONDecodeError as error:
            p.error(f"--{flag}: not JSON ({error}): e.g. '{{\"exploration\": 0.7}}'")
        if not isinstance(options[flag], dict):
            p.error(f"--{flag}: a JSON object of options, not {getattr(opts, flag)}")
    setup = Setup(space=opts.space, **options)
    opts.arms = opts.arms or list(stats.OURS[opts.ours])
    n_seeds = opts.seeds or (1 if opts.quick else 10)
    seeds = list(range(opts.first_seed, opts.first_seed + n_seeds))
    if len({phase(s) for s in seeds}) > 1:
        p.error(f"the seeds {seeds[0]}-{seeds[-1]} mix tuning and evaluation seeds "
                f"(evaluation from {EVALUATION_FIRST_SEED})")  # fmt: skip
    if opts.quick:  # 4 simulations of 5 steps per arm: the five arms within a minute
        setup = replace(setup, grid_size=6, time_steps=5, hidden=16, simulations=4, steps=120,
                        batch_size=8, watermark=8)  # fmt: skip
        opts.test, opts.test_hard = min(opts.test, 4), min(opts.test_hard, 2)
    setup = replace(setup, simulations=opts.simulations or setup.simulations,
                    steps=opts.steps or setup.steps, stream_share=opts.stream_share)  # fmt: skip
    try:  # an option an arm refuses: before any study runs (not in its child, later)
        check_arms(setup, tuple(opts.arms), seeds[0])
    except ValueError as error:
        p.error(str(error))
    out = Path(opts.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = [Path(f) for f in opts.results] if opts.results else [out / "runs.jsonl"]
    work = Path(tempfile.mkdtemp(prefix="work-", dir=out))
    print(f"{opts.space} space, {phase(seeds[0])} seeds {seeds[0]}-{seeds[-1]}, Breed "
          f"{setup.breed}, {setup.ratio:.0f} draws per sample while streaming",
          flush=True)  # fmt: skip
    start = time.perf_counter()
    try:
        runs = measure(setup, seeds, opts.test, opts.test_hard, work, results, opts.quick,
                       report_only=opts.report, arms=tuple(opts.arms),
                       need_tails=opts.ours != "breed")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if opts.ours not in opts.arms:  # nothing to pair the baselines with: their runs only
        stats.print_seeds(runs)
        print(f"\ntotal {time.perf_counter() - start:.0f} s")
        return
    if opts.report:  # medians and ratios over the same seeds for every arm
        complete = {s for s, ran in stats.by_seed(runs).items() if len(ran) == len(opts.arms)}
        runs = [r for r in runs if r["seed"] in complete]
        if not runs:
            p.error("no seed on which every arm ran is recorded")
        seeds = sorted(complete)
    stats.print_seeds(runs)
    if opts.ours == "breed":  # the means, then the worst cases (those recorded)
        stats.print_paired(runs)
        table = stats.rows(runs, opts.space)
        if stats.tails_of(runs, stats.WORST):
            stats.print_tails(runs, "breed", stats.WORST)
            table += stats.tail_rows(runs, opts.space, "breed", stats.WORST)
    else:
        stats.print_tails(runs, opts.ours)
        table = stats.tail_rows(runs, opts.space, opts.ours)
    print_rows(table, f"active sampling, {opts.space} space, {phase(seeds[0])} seeds "
                      f"(ours = {stats.LABELS[opts.ours]}; {len(seeds)} seeds)",
               width=80)  # fmt: skip
    print(
        f"\ntotal {time.perf_counter() - start:.0f} s (studies: "
        f"{sum(r['wall'] for r in runs):.0f} s of training, reused runs included)"
    )
    (out / "results.json").write_text(to_json({"setup": asdict(setup), "runs": runs}))
    if opts.plot:
        plot(runs, Path(opts.plot))
        print(f"plot: {opts.plot}")
    if opts.json:
        print_json(table)


if __name__ == "__main__":
    main()
