"""A fast in-process replica of `active_sampling.py`'s study, for **tuning and
diagnosis only** (issue 46): no figure of it is a result.

The same heat problem, model, optimiser, cosine schedule, batch, budget and test sets
(the tuning ones: seeds 10000, 10001) as `active_sampling.py`, but no processes, no
sockets, no `OnlineTrainer`: simulation ``k`` is drawn (knowing every loss so far),
solved here and put whole into the reservoir at step ``k * stream_share * steps /
simulations`` (the first ones before step 0, up to the watermark), each step trains on
a uniform batch of the reservoir, and every 20 steps each simulation's relative loss
(`melissa_trainer.core.loss_per_simulation`'s: each sample's loss relative to the mean
of the last 4 periods, averaged per simulation) is fed to the sampler, as a `Study`
does. A study of 4,000 steps takes ~10 s instead of 1-7 minutes, so that many
settings can be compared on tuning seeds; the winner is then evaluated once with
`active_sampling.py` on the evaluation seeds.

    python benchmarks/active_sampling_fast.py --space full --arms lhs_opt surrogate \
        --seeds 0 1 2 --steps 4000
    python benchmarks/active_sampling_fast.py --space wide --arms lhs_opt density \
        --density '{"exploration": 0.3}' --diagnose
    python benchmarks/active_sampling_fast.py --space wide --arms warp \
        --options '{"corners": 0.25}' --label corners25 --seeds 0 1 2 3 4   # issue 46, 3rd round
    python benchmarks/active_sampling_fast.py --space wide --arms lhs_opt density \
        --simulations 96 --label budget96 --seeds 0 1 2 3 4   # every arm's budget 96
    python benchmarks/active_sampling_fast.py --space wide --arms density --simulations 96 \
        --options '{"contrast": 0.25}' --label contrast25 --seeds 0 1 2 3 4   # 4th round
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import active_sampling as bench  # noqa: E402
import active_sampling_keys as keys  # noqa: E402
import heat_pipelines as hp  # noqa: E402
from solver import solve  # noqa: E402

from melissa_trainer.launcher import make_sampler  # noqa: E402

REFERENCE_PERIODS, LOSS_STEPS = 4, 20


def tests(setup: bench.Setup, n: int, n_hard: int, cache: Path) -> dict[str, np.ndarray]:
    path = cache / f"fast-tests-{setup.space}-{n}-{n_hard}.npz"
    if not path.exists():
        seeds = keys.TEST_SEEDS["tuning"]
        ux, uy = bench.test_set(setup, setup.bounds, n, seeds[0])
        hx, hy = bench.test_set(setup, bench.hard_bounds(setup), n_hard, seeds[1])
        np.savez(path, uniform_x=ux, uniform_y=uy, hard_x=hx, hard_y=hy)
    return dict(np.load(path))


def warped_design(setup: bench.Setup, seed: int, options: dict[str, Any]) -> Any:
    """The optimised Latin hypercube with static marginals (a bound on what a density
    can buy): ``alpha_top``: the hard region's density relative to the rest; ``edge``:
    the temperatures' marginal a Beta(edge, edge) (below 1: more near the bounds);
    ``corners``: the share of the points, those of the highest ``log2_alpha``, whose
    temperatures are moved to the nearest bound (a vertex of the temperatures' cube:
    the largest contrasts, where the worst held-out simulations are; each temperature
    keeps its side of the middle, so half of them go low and half high)."""
    from scipy.stats import beta

    from melissa_trainer.launcher import ListSampler

    design = bench.fixed_design(setup, "lhs_opt", seed)
    top, edge = float(options.get("alpha_top", 1.0)), float(options.get("edge", 1.0))
    low, high = bench.LOG2_ALPHA
    cut = (bench.HARD_FROM - low) / (high - low)
    mass_below = cut / (cut + top * (1 - cut))
    out = []
    for p in design:
        q = dict(p)
        u = (p["log2_alpha"] - low) / (high - low)
        x = (
            u / mass_below * cut
            if u < mass_below
            else cut + (u - mass_below) / (1 - mass_below) * (1 - cut)
        )
        q["log2_alpha"] = low + x * (high - low)
        for name in setup.names:
            lo, hi = setup.bounds[name]
            if name != "log2_alpha" and hi > lo and edge != 1.0:
                q[name] = lo + float(beta.ppf((p[name] - lo) / (hi - lo), edge, edge)) * (hi - lo)
        out.append(q)
    share = float(options.get("corners", 0.0))
    if share > 0:
        fastest = sorted(range(len(out)), key=lambda i: -out[i]["log2_alpha"])
        for i in fastest[: round(share * len(out))]:
            for name in setup.names:
                lo, hi = setup.bounds[name]
                if name != "log2_alpha" and hi > lo:
                    out[i][name] = lo if out[i][name] < 0.5 * (lo + hi) else hi
    return ListSampler(out)


def sampler_of(setup: bench.Setup, kind: str, seed: int, options: dict[str, Any]) -> Any:
    if kind in ("lhs", "lhs_opt", "sobol"):
        return bench.make_arm(setup, kind, seed)
    if kind == "warp":
        return warped_design(setup, seed, options)
    return make_sampler(kind, setup.bounds, seed=seed, **options)


def study(setup: bench.Setup, kind: str, seed: int, options: dict[str, Any],
          data: dict[str, np.ndarray]) -> dict[str, Any]:  # fmt: skip
    torch.set_num_threads(1)
    sampler = sampler_of(setup, kind, seed, options)
    sampler.plan(setup.simulations)  # as the Launcher does (built, then started)
    sampler.prepare()
    adaptive = hasattr(sampler, "observe")
    model = bench.make_model(setup, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
    rng = np.random.default_rng(seed)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    sims: list[int] = []
    drawn: list[dict[str, float]] = []
    per_sim: dict[int, list[float]] = {}  # id -> [count, relative sum]
    recent: deque[tuple[float, int]] = deque(maxlen=REFERENCE_PERIODS)
    period_ids: list[np.ndarray] = []
    period_losses: list[np.ndarray] = []
    arrive = setup.stream_share * setup.steps / setup.simulations
    first = math.ceil(setup.watermark / setup.time_steps)
    sampler_seconds = 0.0

    def add() -> None:
        nonlocal sampler_seconds
        begin = time.perf_counter()
        p = sampler.draw()
        sampler_seconds += time.perf_counter() - begin
        vector = np.array([p[name] for name in setup.names])
        for step, field_ in enumerate(solve(p, setup.config)):
            xs.append(bench.features(setup, vector, step))
            ys.append(bench.target(field_))
            sims.append(len(drawn))
        drawn.append(p)

    for _ in range(first):
        add()
    x_all = torch.from_numpy(np.stack(xs))
    y_all = torch.from_numpy(np.stack(ys))
    for step in range(setup.steps):
        due = first + int(step / arrive)
        if len(drawn) < min(due, setup.simulations):
            while len(drawn) < min(due, setup.simulations):
                add()
            x_all, y_all = torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))
        for group in optimizer.param_groups:
            group["lr"] = setup.learning_rate * 0.5 * (1 + math.cos(math.pi * step / setup.steps))
        idx = rng.integers(0, len(xs), setup.batch_size)
        losses = ((model(x_all[idx]) - y_all[idx]) ** 2).mean(dim=1)
        optimizer.zero_grad()
        losses.mean().backward()
        optimizer.step()
        if adaptive:
            period_ids.append(np.asarray(sims)[idx])
            period_losses.append(losses.detach().numpy().astype(np.float64))
            if (step + 1) % LOSS_STEPS == 0:
                ids, ls = np.concatenate(period_ids), np.concatenate(period_losses)
                period_ids.clear()
                period_losses.clear()
                recent.append((float(ls.sum()), len(ls)))
                ref = sum(s for s, _ in recent) / sum(n for _, n in recent)
                for sid in np.unique(ids):
                    mine = ls[ids == sid]
                    entry = per_sim.setdefault(int(sid), [0.0, 0.0])
                    entry[0] += len(mine)
                    entry[1] += float(np.sum(1 + (mine - ref) / abs(ref)))
                    begin = time.perf_counter()
                    sampler.observe(int(sid), drawn[sid], entry[1] / entry[0])
                    sampler_seconds += time.perf_counter() - begin
    out: dict[str, Any] = {"sampler": kind, "seed": seed, "space": setup.space,
                           "options": options, "steps": setup.steps,
                           "simulations": setup.simulations}  # fmt: skip
    for name in ("uniform", "hard"):
        x, y = torch.from_numpy(data[f"{name}_x"]), torch.from_numpy(data[f"{name}_y"])
        errors = hp.per_simulation_mse(model, x, y, setup.time_steps)
        out[f"{name}_mse"] = float(errors.mean())
        if name == "uniform":
            out["uniform_p99"] = float(np.percentile(errors, 99))
            out["uniform_max"] = float(errors.max())
            out["uniform_errors"] = [round(float(e), 3) for e in errors]
    hard = [p["log2_alpha"] >= bench.HARD_FROM for p in drawn]
    if adaptive:  # what the sampler saw last: each simulation's relative loss
        out["observed"] = {str(o.simulation_id): o.loss for o in sampler.observations}
    out.update(hard_share=sum(hard) / len(hard), parameters=drawn,
               sampler_seconds=round(sampler_seconds, 4))  # fmt: skip
    return out


def diagnose(path: Path, labels: tuple[str, ...] = ("base",)) -> None:
    """Where each arm's simulations went and where its held-out errors are, over the
    runs of `path` labelled in `labels`: per arm, the correlation over the uniform test
    set of the log error (each run's errors over their mean, the median over runs) with
    log2_alpha and with the spread of the temperatures; the mean error per seventh of
    the log2_alpha range; the histogram of the drawn log2_alpha over the same sevenths;
    the mean distance from each draw to its nearest one and the largest distance from a
    uniform probe (2,000) to its nearest draw (the unit cube over every parameter)."""
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for space in sorted({r["space"] for r in runs}):
        setup = bench.Setup(space=space)
        sampler = make_sampler("uniform", setup.bounds, seed=keys.TEST_SEEDS["tuning"][0])
        tests_ = [sampler.draw() for _ in range(200)]
        alpha = np.array([p["log2_alpha"] for p in tests_])
        temps = np.array([[p[n] for n in setup.names if n != "log2_alpha"] for p in tests_])
        spread = temps.std(axis=1)
        bins = np.linspace(*bench.LOG2_ALPHA, 8)
        which = np.digitize(alpha, bins) - 1
        low = np.array([setup.bounds[n][0] for n in setup.names])
        high = np.array([setup.bounds[n][1] for n in setup.names])
        probe = np.random.default_rng(0).random((2000, len(low)))
        mine = [r for r in runs if r["space"] == space and r.get("label") in labels]
        print(f"== {space} space (labels {', '.join(labels)})")
        for kind in sorted({r["sampler"] for r in mine}):
            chosen = {r["seed"]: r for r in mine if r["sampler"] == kind}  # one per seed
            errors = np.array([chosen[s]["uniform_errors"] for s in sorted(chosen)])
            log_error = np.log(np.median(errors / errors.mean(1, keepdims=True), 0))
            drawn = np.concatenate([[p["log2_alpha"] for p in chosen[s]["parameters"]]
                                    for s in sorted(chosen)])  # fmt: skip
            gaps, cover = [], []
            for s in sorted(chosen):
                x = np.array([[p[n] for n in setup.names] for p in chosen[s]["parameters"]])
                x = (x - low) / (high - low)
                d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
                np.fill_diagonal(d, np.inf)
                gaps.append(d.min(1).mean())
                cover.append(np.sqrt(((probe[:, None] - x[None]) ** 2).sum(-1)).min(1).max())
            per_bin = [round(float(errors[:, which == b].mean()), 1) for b in range(7)]
            print(f"{kind} ({len(chosen)} seeds): corr(log error, log2_alpha) "
                  f"{np.corrcoef(log_error, alpha)[0, 1]:.2f}, corr(log error, temperature "
                  f"spread) {np.corrcoef(log_error, spread)[0, 1]:.2f}\n"
                  f"  mean error (K^2) per seventh of log2_alpha: {per_bin}\n"
                  f"  draws per seventh of log2_alpha: {np.histogram(drawn, bins)[0].tolist()}\n"
                  f"  nearest-draw distance {np.mean(gaps):.3f}, largest probe-to-draw "
                  f"distance {np.mean(cover):.3f}")  # fmt: skip


def compare(path: Path) -> None:
    """Per space, arm and label of the runs of `path`: the median over seeds of the
    ratio optimised LHS / arm (the same seed's "lhs_opt" run; > 1: the arm better) of
    the uniform set's mean, p99 and max per-simulation MSE and the hard set's mean."""
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def budget(r: dict[str, Any]) -> int:
        return int(r.get("simulations", 48))

    base = {(r["space"], r["seed"], budget(r)): r for r in runs if r["sampler"] == "lhs_opt"}
    groups: dict[tuple[str, str, str], dict[int, dict[str, Any]]] = {}
    for r in runs:
        if r["sampler"] != "lhs_opt" and (r["space"], r["seed"], budget(r)) in base:
            key = (r["space"], r["sampler"], r.get("label", ""))
            groups.setdefault(key, {})[r["seed"]] = r
    print("optimised LHS / arm, medians over the seeds: mean, p99, max, hard mean")
    for (space, kind, label), chosen in sorted(groups.items()):
        cells = []
        for key in ("uniform_mse", "uniform_p99", "uniform_max", "hard_mse"):
            ratios = [base[space, s, budget(r)][key] / r[key] for s, r in chosen.items()]
            cells.append(f"{statistics.median(ratios):5.2f}")
        share = statistics.median(r["hard_share"] for r in chosen.values())
        print(f"  {space:<5} {kind:<10} {label:<12} seeds {sorted(chosen)}: "
              f"{'  '.join(cells)}; hard share {share:.2f}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--space", choices=sorted(bench.SPACES), default="full")
    p.add_argument("--arms", nargs="+", default=["lhs_opt", "surrogate"])
    p.add_argument("--options", default="{}", help="JSON: the adaptive arms' options")
    p.add_argument("--label", default="", help="a name for this setting in the results")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--simulations", type=int, default=48, help="the budget of every arm")
    p.add_argument("--test", type=int, default=200)
    p.add_argument("--test_hard", type=int, default=100)
    p.add_argument("--results", default="outputs/active_sampling_fast.jsonl",
                   help="JSON lines: every study appended")  # fmt: skip
    p.add_argument("--diagnose", nargs="*", metavar="LABEL",
                   help="run nothing: the draws' and errors' diagnosis of the --results "
                        "runs with these labels (default: base)")  # fmt: skip
    opts = p.parse_args()
    if opts.diagnose is not None:
        compare(Path(opts.results))
        diagnose(Path(opts.results), tuple(opts.diagnose) or ("base",))
        return
    if any(s >= keys.EVALUATION_FIRST_SEED for s in opts.seeds):
        p.error("tuning seeds only (below the evaluation seeds)")
    setup = replace(bench.Setup(space=opts.space), steps=opts.steps, simulations=opts.simulations)
    data = tests(setup, opts.test, opts.test_hard, Path("/tmp"))
    options = json.loads(opts.options)
    table: dict[str, list[dict[str, Any]]] = {}
    for seed in opts.seeds:
        for kind in opts.arms:
            begin = time.perf_counter()
            run = study(
                setup, kind, seed, {} if kind in ("lhs", "lhs_opt", "sobol") else options, data
            )
            run["label"], run["wall"] = opts.label, round(time.perf_counter() - begin, 1)
            Path(opts.results).parent.mkdir(parents=True, exist_ok=True)
            with open(opts.results, "a") as f:
                f.write(json.dumps(run) + "\n")
            table.setdefault(kind, []).append(run)
            print(f"{kind:<10}{seed:>4}  mean {run['uniform_mse']:8.2f}  p99 "
                  f"{run['uniform_p99']:9.2f}  max {run['uniform_max']:9.2f}  hard "
                  f"{run['hard_mse']:8.2f}  share {run['hard_share']:.2f}  {run['wall']:.0f}s  "
                  f"sampler {run['sampler_seconds']:.2f}s", flush=True)  # fmt: skip
    base = table.get("lhs_opt")
    for kind, runs in table.items():
        if base is None or kind == "lhs_opt":
            continue
        ratios = {m: statistics.median(b[m] / r[m] for b, r in zip(base, runs, strict=True))
                  for m in ("uniform_mse", "uniform_p99", "uniform_max", "hard_mse")}  # fmt: skip
        print(
            f"lhs_opt / {kind} {opts.label}: "
            + ", ".join(f"{m} {v:.2f}" for m, v in ratios.items())
        )


if __name__ == "__main__":
    main()
