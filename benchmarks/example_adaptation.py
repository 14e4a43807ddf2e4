"""How many of an example's draws can adapt, and how many do, at the example's own
defaults: ``--sampler breed`` and ``--sampler density`` of the heat example (the one
study example that offers them), each run once per seed, read from its ``--json``
summary's ``sampler``: ``draws``; ``adaptive_draws``, those made holding at least
``min_observations`` losses (the most the losses could steer); ``steered``, those they
did steer (Breed's bred draws, the density sampler's draws the loss bent).

And what the loss depends on, from each study's last checkpoint (the sampler's kept
observations: each simulation's relative training loss and parameters): per parameter,
the density sampler's evidence (|Spearman's rank correlation| x sqrt(n - 1) of the
launch-order-detrended log losses, `density_warp.trend_evidence`; about |N(0, 1)| where
the loss ignores it, 3 the default needed to bend it) with the parameter itself, with its
distance from the middle of its range, and with the parameters' spread (max - min).

Not a timing: a count. Rows (``--json``): per sampler and seed, ``ours`` the draws
steered, ``baseline`` the draws that could have been (``adaptive_draws``), ratio ours /
baseline; and the largest evidence with a parameter itself (``ours``) and with its
distance from the middle or the spread (``baseline``). Extra flags after ``--`` go to
the example (``-- --num_simulations 16`` for another size).

    python benchmarks/example_adaptation.py --seeds 2 --json
    python benchmarks/example_adaptation.py -- --num_simulations 16 --time_steps 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, print_json, print_rows  # noqa: E402

from melissa_trainer.launcher.density_warp import (  # noqa: E402
    detrended_log_losses,
    trend_evidence,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "heat_pde" / "train.py"


def run_example(sampler: str, seed: int, out: Path, extra: list[str]) -> dict[str, Any]:
    """The example's ``--json`` summary, its study's kept observations added
    (``observations``, from its last checkpoint)."""
    cmd = [sys.executable, str(EXAMPLE), "--sampler", sampler, "--seed", str(seed),
           "--output_dir", str(out), "--no_plot", "--json", "--disable_progress_bar",
           *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{sampler} seed {seed} failed:\n{proc.stderr[-3000:]}")
    summary: dict[str, Any] = json.loads(
        [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
    )
    last = max((out / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name[11:]))
    state = json.loads((last / "rank_0" / "source.json").read_text())
    summary["observations"] = state["launcher"]["sampler"]["observations"]
    return summary


def evidence(observations: list[dict[str, Any]]) -> dict[str, float]:
    """The density sampler's evidence of the kept losses with each parameter, with its
    distance from the middle of the observed range (``|name|``), and with the
    parameters' spread (``spread``)."""
    names = list(observations[0]["parameters"])
    points = np.array([[o["parameters"][n] for n in names] for o in observations])
    losses = np.array([o["loss"] for o in observations], dtype=np.float64)
    ids = np.array([o["simulation_id"] for o in observations], dtype=np.float64)
    scores = detrended_log_losses(losses, ids)
    low, high = points.min(axis=0), points.max(axis=0)
    middle = np.abs(points - (low + high) / 2.0)
    spread = (points.max(axis=1) - points.min(axis=1))[:, None]
    values = trend_evidence(np.hstack([points, middle, spread]), scores)
    keys = [*names, *(f"|{n}|" for n in names), "spread"]
    return {k: round(float(v), 2) for k, v in zip(keys, values, strict=True)}


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--samplers", nargs="+", default=["breed", "density"])
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--first_seed", type=int, default=42, help="the example's default seed")
    p.add_argument("extra", nargs="*", help="after --: the example's flags")
    add_flags(p)
    opts = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="example-adaptation-") as work:
        for seed in range(opts.first_seed, opts.first_seed + opts.seeds):
            for sampler in opts.samplers:  # (interleaved per seed)
                summary = run_example(sampler, seed, Path(work) / f"{sampler}-{seed}",
                                      opts.extra)  # fmt: skip
                drawn = summary["sampler"]
                ev = evidence(summary["observations"])
                itself = max(v for k, v in ev.items() if not k.startswith("|") and k != "spread")
                other = max(v for k, v in ev.items() if k.startswith("|") or k == "spread")
                print(f"{sampler} seed {seed}: {drawn['drawn_by']}; adaptive_draws "
                      f"{drawn['adaptive_draws']}, steered {drawn['steered']}; evidence "
                      f"{ev}", flush=True)  # fmt: skip
                could = drawn["adaptive_draws"] or 0
                rows.append({"case": f"heat_pde {sampler}, seed {seed}: draws steered / "
                                     f"draws that could adapt (of {drawn['draws']})",
                             "ours": drawn["steered"], "baseline": could, "unit": "draws",
                             "ratio": round(drawn["steered"] / could, 3) if could else None,
                             "target": None})  # fmt: skip
                rows.append({"case": f"heat_pde {sampler}, seed {seed}: largest evidence, "
                                     f"a parameter / its distance from the middle or the "
                                     f"spread (3 bends)", "ours": itself, "baseline": other,
                             "unit": "evidence", "ratio": round(itself / other, 3),
                             "target": None})  # fmt: skip
    print_rows(rows, "the heat example's adaptive samplers at its defaults", width=100)
    if opts.json:
        print_json(rows)


if __name__ == "__main__":
    main()
