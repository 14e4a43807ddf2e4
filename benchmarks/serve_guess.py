"""The served surrogate as an iterative solver's initial guess: what checking the guess
saves (docs/how-to/serve-while-training.md, "Check the guess before using it").

Workload: the `examples/heat_guess` study (implicit heat solvers, Jacobi by default,
whose simulations ask the trainer's surrogate for each step's initial guess while it
trains on their stream). Arm A keeps a guess only if its residual is the smaller
(``--guess_check residual``, the example's default); arm B takes every guess that comes
(``--guess_check none``). The arms alternate (A B, B A, ..., `--rounds` each, the same
simulations' parameters in every run). The baseline is the same simulations never
asking, solved from their previous state: computed here, in process, from each run's
recorded parameters (`heat_guess.train.baseline_record`: a simulation that never asks
does not depend on the trainer, so a study run for it would give the same counts).

The figure is the iterations of the linear solves per time step (not the products by A:
those add the initial residual and the guess's own, the same in both arms), mean over
the simulations of a run, median over the runs; ratio baseline / ours (higher is
better: fewer iterations than never asking). Rows for the whole study, for its first
half (the simulations launched first, which start before training and get the early
models: where an unchecked guess could cost more than none), and for the steps answered
by the untrained model (version 0, the model as built: its guess is the worst; a run
with no such step is left out, and a row with none is NaN, written null). No target: the figures
are for the docs to quote. The serving counters of each run (requests, answered,
expired) are printed under the table.

    python benchmarks/serve_guess.py     # 3 rounds, the example's 6 simulations of 50 steps
    python benchmarks/serve_guess.py --quick --json   # 1 round, 3 simulations of 12 steps
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
from heat_guess.solver import METHODS, GuessConfig  # noqa: E402
from report import add_flags, finish  # noqa: E402

#: the arms, in the order of an even round: A, then B
ARMS = ("residual", "none")
NAMES = {"residual": "residual check", "none": "every guess taken"}


def mean_iterations(simulations: list[dict[str, Any]]) -> float:
    """Mean iterations per time step over `simulations` (their `iterations` lists)."""
    return float(np.mean([i for s in simulations for i in s["iterations"]]))


def run_once(arm: str, config: GuessConfig, simulations: int, seed: int, tmp: Path) -> dict:
    """One study of `arm` (a `GUESS_CHECKS` value): its records, with the baseline's
    (never asking) beside each simulation's, the serving counters and the final error."""
    import torch  # (heavy: imported once the command line is parsed)
    from heat_guess.train import baseline_record, run_study

    torch.set_num_threads(1)  # the cores are the simulations'
    arm_config = GuessConfig(
        config.grid_size, config.time_steps, config.dt, config.tol, config.method, arm
    )
    result = run_study(
        tempfile.mkdtemp(dir=tmp), arm_config, num_simulations=simulations, seed=seed
    )
    sims = result["simulations"]
    if len(sims) != simulations:
        raise RuntimeError(f"{len(sims)} of {simulations} simulations recorded")
    never = [{"iterations": baseline_record(s["parameters"], config).iterations} for s in sims]
    return {"sims": sims, "never": never, "serving": result["serving"],
            "final_error": result["final_error"], "global_step": result["global_step"]}  # fmt: skip


def untrained_steps(run: dict) -> tuple[list[int], list[int]]:
    """The iterations of `run`'s steps answered by the untrained model (version 0: the
    model as built, before training's first step), and of the same steps never asking."""
    ours, never = [], []
    for sim, alone in zip(run["sims"], run["never"], strict=True):
        for version, mine, theirs in zip(
            sim["versions"], sim["iterations"], alone["iterations"], strict=True
        ):
            if version == 0:
                ours.append(mine)
                never.append(theirs)
    return ours, never


def rows_of(runs: dict[str, list[dict]]) -> list[dict[str, Any]]:
    """The table: per arm, the whole study, its first half, and the steps answered by
    the untrained model (runs with none left out), against never asking."""
    rows = []
    for part, pick in (("whole study", slice(None)), ("first half", None)):
        for arm in ARMS:
            ours, base = [], []
            for run in runs[arm]:
                cut = pick or slice(0, max(1, len(run["sims"]) // 2))
                ours.append(mean_iterations(run["sims"][cut]))
                base.append(mean_iterations(run["never"][cut]))
            o, b = statistics.median(ours), statistics.median(base)
            rows.append({
                "case": f"iterations/step, {part}: {NAMES[arm]} / never asking",
                "ours": o, "baseline": b, "unit": "iter/step", "ratio": b / o, "target": None,
            })  # fmt: skip
    for arm in ARMS:
        pairs = [untrained_steps(run) for run in runs[arm]]
        ours = [float(np.mean(p[0])) for p in pairs if p[0]]
        base = [float(np.mean(p[1])) for p in pairs if p[0]]
        o = statistics.median(ours) if ours else float("nan")
        b = statistics.median(base) if base else float("nan")
        rows.append({
            "case": f"iterations/step, steps answered by version 0: {NAMES[arm]} / never",
            "ours": o, "baseline": b, "unit": "iter/step", "ratio": b / o, "target": None,
        })  # fmt: skip
    return rows


def notes_of(runs: dict[str, list[dict]], order: list[str]) -> list[str]:
    """Lines for people: per run, the iterations per simulation against never asking,
    the guesses taken, the first model version, the serving counters."""
    lines, seen = [], {arm: 0 for arm in ARMS}
    for arm in order:
        run = runs[arm][seen[arm]]
        seen[arm] += 1
        per_sim = [round(float(np.mean(s["iterations"])), 1) for s in run["sims"]]
        never = [round(float(np.mean(s["iterations"])), 1) for s in run["never"]]
        used = [int(sum(s["used"])) for s in run["sims"]]
        first = [next((v for v in s["versions"] if v >= 0), None) for s in run["sims"]]
        v0 = len(untrained_steps(run)[0])
        t = run["serving"]
        lines.append(
            f"{NAMES[arm]}: iterations/step per simulation {per_sim} (never asking {never}); "
            f"guesses taken {used}; first model version {first}; {v0} steps answered by "
            f"version 0; requests "
            f"{int(t.get('requests', 0))}, answered {int(t.get('answered', 0))}, expired "
            f"{int(t.get('expired', 0))}; final error {run['final_error']:.3g} after "
            f"{run['global_step']} steps"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_flags(parser, quick="1 round of 3 simulations of 12 steps on a 16 x 16 grid")
    parser.add_argument("--rounds", type=int, default=None, help="A B rounds (default 3)")
    parser.add_argument("--simulations", type=int, default=None, help="per study (default 6)")
    parser.add_argument("--time_steps", type=int, default=None, help="per simulation (50)")
    parser.add_argument("--grid_size", type=int, default=None, help="(default 32)")
    parser.add_argument("--method", choices=METHODS, default="jacobi")
    parser.add_argument("--seed", type=int, default=0, help="the simulations' parameters")
    opts = parser.parse_args()
    rounds = opts.rounds or (1 if opts.quick else 3)
    simulations = opts.simulations or (3 if opts.quick else 6)
    config = GuessConfig(
        grid_size=opts.grid_size or (16 if opts.quick else 32),
        time_steps=opts.time_steps or (12 if opts.quick else 50),
        method=opts.method,
    )
    runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    order: list[str] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        for i in range(rounds):
            for arm in ARMS if i % 2 == 0 else ARMS[::-1]:
                runs[arm].append(run_once(arm, config, simulations, opts.seed, Path(tmpdir)))
                order.append(arm)
    title = (
        f"heat_guess ({config.method}, {simulations} simulations of {config.time_steps} "
        f"steps, {config.grid_size}^2): {rounds} A/B rounds, medians"
    )
    finish(rows_of(runs), title, 66, as_json=opts.json, notes=notes_of(runs, order), table_too=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
