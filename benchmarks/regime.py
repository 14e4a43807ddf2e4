"""The regime map of `online_vs_offline.py --sweep`: where online training pays.

One *point* per cost of a simulated sample (the heat solver's sub-steps): the measured
ratio r = (seconds to simulate one sample) / (seconds of one training step), and the
error of offline's best split of the budget over online's at equal wall time (and with
offline's disk limited to a share of what online streamed). These are the pure parts:
the point's figures from the runs, the crossover, the rows, the table and the plot; run
as a script, it merges the ``regime.json`` of several sweeps into one table and plot:

    python benchmarks/regime.py run1/regime.json run2/regime.json --plot regime.png
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

Point = dict[str, Any]


def point(substeps: int, budget: dict[str, Any], time_steps: int) -> Point:
    """The figures of one sweep point from `equal_budget`'s runs.

    Simulating one sample: the offline simulations' pace (the time the last complete
    file was done, over the samples complete by then: process start-ups included, one
    simulation at a time on its core). A training step: offline's (the median over its
    splits of training seconds per step, the read into memory included); online's is
    reported beside it.
    """
    files = budget["simulate"]["files"]
    sim_per_sample = files[-1][1] / (len(files) * time_steps)
    offline_step = statistics.median(
        run["train_seconds"] / run["steps"] for run in budget["offline"].values()
    )
    online = budget["online"]
    best_share, best = min(budget["offline"].items(), key=lambda kv: kv[1]["val_mse"])
    storage = budget["storage"]
    return {
        "substeps": substeps,
        "time_steps": time_steps,
        "sim_ms_per_sample": round(1e3 * sim_per_sample, 3),
        "offline_step_ms": round(1e3 * offline_step, 3),
        "online_step_ms": round(1e3 * online["wall"] / max(online["steps"], 1), 3),
        "r": round(sim_per_sample / offline_step, 3),
        "online": _summary(online),
        "offline": {str(f): _summary(run) for f, run in budget["offline"].items()},
        "best_share": best_share,
        "storage": _summary(storage),
        "time_ratio": best["val_mse"] / online["val_mse"],
        "storage_ratio": storage["val_mse"] / online["val_mse"],
    }


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run[k] for k in ("simulations", "steps", "val_mse") if k in run}


def crossover(points: list[Point], key: str = "time_ratio") -> float | None:
    """The r where offline error / online error crosses 1, interpolated linearly in
    (log r, log ratio) between the two measured points around it; None if it does not
    cross between the points (the lowest crossing if it crosses more than once)."""
    ordered = sorted(points, key=lambda p: p["r"])
    for a, b in zip(ordered, ordered[1:], strict=False):
        ya, yb = math.log(a[key]), math.log(b[key])
        if ya == 0:
            return float(a["r"])
        if ya * yb < 0:
            xa, xb = math.log(a["r"]), math.log(b["r"])
            return math.exp(xa + (xb - xa) * (0 - ya) / (yb - ya))
    if ordered and math.log(ordered[-1][key]) == 0:
        return float(ordered[-1]["r"])
    return None


def verdict(points: list[Point], key: str = "time_ratio") -> str:
    """One sentence: where online pays, from the measured points."""
    ordered = sorted(points, key=lambda p: p["r"])
    r_cross = crossover(ordered, key)
    if r_cross is not None:
        return f"offline error / online error crosses 1 at r ~ {r_cross:.2g}"
    lo, hi = ordered[0]["r"], ordered[-1]["r"]
    side = "online" if ordered[0][key] > 1 else "offline"
    return f"{side} ahead at every point measured (r from {lo:.2g} to {hi:.2g}): no crossover"


def rows(points: list[Point], storage_fraction: float, target: float) -> list[dict[str, Any]]:
    """Two rows a point (the usual `{"rows": [...]}` format, ours = online): equal wall
    time against offline's best split (target `target` where r >= 10), equal storage."""
    out = []
    for p in sorted(points, key=lambda p: p["r"]):
        on = p["online"]["val_mse"]
        best = p["offline"][str(p["best_share"])]["val_mse"]
        label = f"r = {p['r']:.2g} ({p['time_steps']} steps x {p['substeps']} sub-steps)"
        out.append({
            "case": f"{label}: equal wall time, val MSE offline (best: {p['best_share']:.0%} "
                    "simulating) / online",
            "ours": round(on, 5), "baseline": round(best, 5), "unit": "K^2",
            "ratio": round(best / on, 3), "target": target if p["r"] >= 10 else None,
        })  # fmt: skip
        stored = p["storage"]["val_mse"]
        out.append({
            "case": f"{label}: equal storage ({storage_fraction:g} of streamed), val MSE "
                    "offline / online",
            "ours": round(on, 5), "baseline": round(stored, 5), "unit": "K^2",
            "ratio": round(stored / on, 3), "target": None,
        })  # fmt: skip
    return out


def print_table(points: list[Point], budget: float) -> None:
    """The map: one line a point."""
    print(f"\nThe regime map: equal wall time ({budget:g} s a pipeline), training and "
          "simulations pinned to one core each")  # fmt: skip
    head = ["steps x sub-steps", "sim ms/sample", "step ms (off/on)", "r", "online sims/steps/MSE",
            "offline best: share sims/steps/MSE", "ratio", "storage ratio"]  # fmt: skip
    print(" | ".join(head))
    for p in sorted(points, key=lambda p: p["r"]):
        on, f = p["online"], p["best_share"]
        off = p["offline"][str(f)]
        print(
            f"{p['time_steps']} x {p['substeps']} | {p['sim_ms_per_sample']:.3g} | "
            f"{p['offline_step_ms']:.3g} / "
            f"{p['online_step_ms']:.3g} | {p['r']:.3g} | {on['simulations']} / {on['steps']} / "
            f"{on['val_mse']:.4g} | {f:.0%}: {off['simulations']} / {off['steps']} / "
            f"{off['val_mse']:.4g} | {p['time_ratio']:.3g} | {p['storage_ratio']:.3g}"
        )
    print(f"equal wall time: {verdict(points)}")
    print(f"equal storage: {verdict(points, 'storage_ratio')}")


def plot(points: list[Point], path: Path, budget: float) -> None:
    """Offline error / online error against r (log-log), with the line where they tie."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ordered = sorted(points, key=lambda p: p["r"])
    r = [p["r"] for p in ordered]
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    ax.plot(r, [p["time_ratio"] for p in ordered], "o-", label="equal wall time (best split)")
    ax.plot(r, [p["storage_ratio"] for p in ordered], "s--", label="equal storage")
    ax.axhline(1.0, color="grey", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("r = time to simulate a sample / time of a training step")
    ax.set_ylabel("offline error / online error (> 1: online pays)")
    ax.set_title(f"heat equation, {budget:g} s a pipeline, 1 core training + 1 simulating")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    """Merge the maps of several ``--sweep`` runs (their ``regime.json``): the table, the
    crossover and the plot of all their points together."""
    import argparse
    import json

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("files", nargs="+", type=Path, help="regime.json files of --sweep runs")
    p.add_argument("--budget", type=float, default=60.0, help="the runs' budget (s), a label")
    p.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    opts = p.parse_args()
    points = [point for f in opts.files for point in json.loads(f.read_text())]
    print_table(points, opts.budget)
    if opts.plot:
        plot(points, opts.plot, opts.budget)
        print(f"plot: {opts.plot}")


if __name__ == "__main__":
    main()
