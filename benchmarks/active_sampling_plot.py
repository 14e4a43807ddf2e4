"""The figure of benchmarks/active_sampling.py's ``--plot``: where each arm put its
simulations (`plot`)."""

from __future__ import annotations

from pathlib import Path

from active_sampling_stats import ARMS, LABELS, Run
from heat_problem import HARD_FROM, LOG2_ALPHA


def plot(runs: list[Run], path: Path) -> None:
    """Where each arm put its simulations (the first seed): t_left against log2_alpha,
    coloured by launch order, the hard region shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seed = min(r["seed"] for r in runs)
    kinds = [a for a in ARMS if any(r["sampler"] == a and r["seed"] == seed for r in runs)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.4 * len(kinds), 4.6), sharey=True,
                             layout="constrained", squeeze=False)  # fmt: skip
    axes = axes[0]
    for ax, kind in zip(axes, kinds, strict=True):
        run = next(r for r in runs if r["sampler"] == kind and r["seed"] == seed)
        x = [p["t_left"] for p in run["parameters"]]
        y = [p["log2_alpha"] for p in run["parameters"]]
        ax.axhspan(HARD_FROM, LOG2_ALPHA[1], color="C3", alpha=0.12, label="hard region")
        dots = ax.scatter(x, y, c=range(len(x)), cmap="viridis", s=22)
        name = "Breed (adaptive)" if kind == "breed" else LABELS[kind]
        ax.set_title(f"{name}: {run['hard_share']:.0%} in the hard region\n"
                     f"MSE {run['uniform_mse']:.3g} K$^2$ (uniform), "
                     f"{run['hard_mse']:.3g} (hard)", fontsize=10)  # fmt: skip
        ax.set_xlabel("t_left (K)")
        ax.set_ylim(*LOG2_ALPHA)
    axes[0].set_ylabel("log2_alpha")
    axes[0].legend(loc="lower left", fontsize=8)
    fig.colorbar(dots, ax=list(axes), label="launch order")
    fig.savefig(path, dpi=90)
    plt.close(fig)
