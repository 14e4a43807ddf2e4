"""What `online_vs_offline.py` prints of its three comparisons: the tables, the rows
(``--json``: ``{"rows": [...]}``) with their targets, and the plot of validation error
against wall time. It reads the pipelines' `Run` records; it measures nothing.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

#: one pipeline's record, as its process returned it (`heat_pipelines`, `heat_offline`)
Run = dict[str, Any]

TARGET_OVERLAP = 0.87
TARGET_ERROR_RATIO = 1.43
#: online's training rate while its simulations run / the same training alone
TARGET_SHARE = 0.9


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def table(head: list[str], lines: list[list[Any]]) -> None:
    """Print a left column of labels and right-aligned columns."""
    width = max(len(str(line[0])) for line in [head, *lines]) + 2
    for line in [head, *lines]:
        cells = [f"{c:.4g}" if isinstance(c, float) else str(c) for c in line[1:]]
        print(f"{line[0]:<{width}}" + "".join(f"{c:>13}" for c in cells))


def print_tables(data: dict[str, Run], budget: dict[str, Any], opts: argparse.Namespace) -> None:
    sim, on, off, alone = data["simulate"], data["online"], data["offline"], data["alone"]
    print(f"\n1. Equal data: {opts.simulations} simulations, {opts.ratio:g} draws per sample")
    table(
        ["", "wall s", "steps", "disk", "peak RSS MB", "val MSE K^2"],
        [
            ["offline (simulate, then train)", sim["wall"] + off["wall"], off["steps"],
             mb(sim["bytes_on_disk"]), off["peak_rss_mb"], off["val_mse"]],
            ["online", on["wall"], on["steps"], mb(on["bytes_on_disk"]), on["peak_rss_mb"],
             on["val_mse"]],
        ],
    )  # fmt: skip
    print(
        f"t_sim, the simulations alone: {data['streamed']['wall']:.1f} s streaming (online's), "
        f"{sim['wall']:.1f} s writing .npy (offline's); t_train, online's training alone "
        f"from memory: {alone['wall']:.1f} s; offline's training: {off['wall']:.1f} s"
    )
    print(
        f"training rates after the first step, steps/s (per CPU-second): online's training "
        f"alone {alone['steps_per_s']:.1f} ({alone['cpu_steps_per_s']:.1f}), offline's "
        f"{off['steps_per_s']:.1f} ({off['cpu_steps_per_s']:.1f})"
    )
    on_b, stored = budget["online"], budget["storage"]
    print(f"\n2, 3. Equal wall time: {opts.budget:g} s each")
    lines = [["online", on_b["simulations"], on_b["steps"], mb(on_b["bytes_on_disk"]),
              on_b["val_mse"]]]  # fmt: skip
    for f, run in budget["offline"].items():
        lines.append([f"offline, simulating {f:.0%} of it", run["simulations"], run["steps"],
                      mb(run["bytes_on_disk"]), run["val_mse"]])  # fmt: skip
    lines.append([f"offline, disk <= {mb(stored['storage_budget'])}", stored["simulations"],
                  stored["steps"], mb(stored["bytes_on_disk"]), stored["val_mse"]])  # fmt: skip
    for line, run in zip(lines, [on_b, *budget["offline"].values(), stored], strict=True):
        line.insert(3, run["steps_per_s"])
        line.insert(4, run["cpu_steps_per_s"])
    table(["", "simulations", "steps", "steps/s", "per CPU-s", "disk", "val MSE K^2"], lines)
    print(f"online streamed {mb(on_b['bytes_streamed'])} and stored none of it")


def rows(data: dict[str, Run], budget: dict[str, Any], opts: argparse.Namespace) -> list[dict]:
    sim, on, off, alone = data["simulate"], data["online"], data["offline"], data["alone"]
    t_off = sim["wall"] + off["wall"]
    halves = max(data["streamed"]["wall"], alone["wall"])
    halves_writing = max(sim["wall"], alone["wall"])
    best_f, best = min(budget["offline"].items(), key=lambda kv: kv[1]["val_mse"])
    on_b, stored = budget["online"], budget["storage"]

    def row(case: str, ours: float, baseline: float, unit: str, target: float | None) -> dict:
        return {"case": case, "ours": round(ours, 4), "baseline": round(baseline, 4),
                "unit": unit, "ratio": round(baseline / ours, 3), "target": target}  # fmt: skip

    return [
        row("equal data: overlap, max(t_sim, t_train) / t_online", on["wall"], halves, "s",
            TARGET_OVERLAP),
        row("equal data: the same, t_sim of offline's (.npy) simulations", on["wall"],
            halves_writing, "s", None),
        row("equal data: wall time, offline / online", on["wall"], t_off, "s", None),
        row("equal data: validation MSE, offline / online", on["val_mse"], off["val_mse"],
            "K^2", None),
        row(f"equal wall time: val MSE, offline (best: {best_f:.0%} simulating) / online",
            on_b["val_mse"], best["val_mse"], "K^2", TARGET_ERROR_RATIO),
        row(f"equal storage ({opts.storage_fraction:g} of streamed): val MSE, offline / online",
            on_b["val_mse"], stored["val_mse"], "K^2", TARGET_ERROR_RATIO),
        share_row(f"training while simulations run (placement {opts.placement}): "
                  "steps/s, online's / the same training alone", on_b, alone, TARGET_SHARE),
        share_row("training alone (equal data): steps per CPU-second, online's trainer / "
                  "offline's loop", alone, off, None, "cpu_steps_per_s"),
        share_row(f"equal wall time: training steps per CPU-second, online / offline "
                  f"({best_f:.0%})", on_b, best, None, "cpu_steps_per_s"),
    ] + ab_rows(budget, alone, best, best_f)  # fmt: skip


def share_row(
    case: str, online: Run, alone: Run, target: float | None, key: str = "steps_per_s"
) -> dict:
    """Online's training rate while its simulations ran / the training alone's (higher
    is better: ratio = ours / baseline); `key`: which rate of the two runs."""
    ours, base = online[key], alone[key]
    unit = "steps/CPU-s" if key == "cpu_steps_per_s" else "steps/s"
    return {"case": case, "ours": round(ours, 2), "baseline": round(base, 2),
            "unit": unit, "ratio": round(ours / base, 3), "target": target}  # fmt: skip


def ab_rows(budget: dict[str, Any], alone: Run, best: Run, best_f: float) -> list[dict]:
    """With `--placement_ab`: the medians of the alternate online runs, each placement."""
    if "online_none" not in budget:
        return []
    out = []
    for name, runs in (("default", budget["online_ab"]), ("none", budget["online_none"])):
        rate = statistics.median(r["steps_per_s"] for r in runs)
        mse = statistics.median(r["val_mse"] for r in runs)
        out.append(share_row(f"A/B placement {name} ({len(runs)} runs, medians): steps/s, "
                             "online's / alone", {"steps_per_s": rate}, alone, None))  # fmt: skip
        case = f"A/B placement {name}: val MSE, offline (best: {best_f:.0%}) / online"
        base = best["val_mse"]
        out.append({"case": case, "ours": round(mse, 4), "baseline": round(base, 4),
                    "unit": "K^2", "ratio": round(base / mse, 3), "target": None})  # fmt: skip
    return out


def plot(budget: dict[str, Any], path: Path, opts: argparse.Namespace) -> None:
    """Validation error against wall time, online and every offline run of case 2, 3."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    curves = [("online", budget["online"], "C0", "-")]
    for i, (f, run) in enumerate(budget["offline"].items()):
        curves.append((f"offline, simulating {f:.0%}", run, f"C{i + 1}", "--"))
    storage = budget["storage"]
    curves.append((f"offline, disk <= {mb(storage['storage_budget'])}", storage, "C7", ":"))
    for label, run, color, style in curves:
        t, err = zip(*run["curve"], strict=True)
        ax.plot(t, err, style, color=color, marker="o", markersize=3, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("wall time (s): simulations + training")
    ax.set_ylabel("validation MSE (K$^2$)")
    ax.set_title(f"heat equation, {opts.budget:g} s budget, 2 cores")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.savefig(path, dpi=90)
    plt.close(fig)
