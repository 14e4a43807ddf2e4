"""How big does a study's ``draws.csv`` grow, and how much does its skip of small loss
moves (`launcher.draw_log.LOSS_CHANGE`: a ``loss`` row only when the loss moved by more
than 10% of the last written) save? On real studies of the heat example.

Each study runs the heat example (`examples/heat_pde/train.py`, in this process through
`runpy`) with the surrogate sampler, training while the study draws (reservoir buffer,
``--sample_to_insert_ratio 4``, ``--simulation_loss_steps 5``), with the skip off
(`LOSS_CHANGE` set to -1: every loss handed to the sampler gets a row, as before the
skip). Its file's rows are then replayed through `loss_changed` at the default share:
the rows the library writes for that same sequence of losses. A paired comparison (one
study per size: the losses that reach the sampler depend on the machine's load, the
rule on the sequence alone). Rows: per size, loss rows and bytes with the skip (ours)
and without (baseline), ratio baseline / ours.

    python benchmarks/draws_log_size.py --n_sims 24 48 96
    python benchmarks/draws_log_size.py --quick     # 12 simulations: checks the pipeline
"""

from __future__ import annotations

import argparse
import csv
import io
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from melissa_trainer.common.json_output import to_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HEAT = ROOT / "examples" / "heat_pde" / "train.py"
FLAGS = ["--sampler", "surrogate", "--grid_size", "8", "--time_steps", "40",
         "--num_validation", "4", "--watermark", "100", "--buffer_size", "2000",
         "--sample_to_insert_ratio", "4", "--simulation_loss_steps", "5", "--batch_size",
         "32", "--disable_progress_bar", "--no_plot"]  # fmt: skip


def study(n_sims: int, out: str) -> None:
    """One heat study of `n_sims` simulations into `out`, every loss given a row."""
    from melissa_trainer.launcher import draw_log

    draw_log.LOSS_CHANGE = -1.0  # |change| > -|last|: always (the file before the skip)
    sys.argv = [str(HEAT), "--num_simulations", str(n_sims), "--output_dir", out, *FLAGS]
    runpy.run_path(str(HEAT), run_name="__main__")


def measure(path: Path) -> dict[str, Any]:
    """The file's rows and bytes, and those the default skip keeps of the same rows."""
    from melissa_trainer.launcher.draw_log import loss_changed

    text = path.read_bytes().decode()  # (read_text would turn its \r\n into \n)
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    event, loss = header.index("event"), header.index("loss")
    last: dict[str, float] = {}
    kept = []
    for row in body:
        if row[event] == "loss":
            value = float(row[loss])
            if not loss_changed(last.get(row[0]), value):
                continue
            last[row[0]] = value
        kept.append(row)
    thinned = io.StringIO()
    csv.writer(thinned).writerows([header, *kept])
    return {
        "draws": sum(r[event] == "draw" for r in body),
        "loss_rows": sum(r[event] == "loss" for r in body),
        "loss_rows_kept": sum(r[event] == "loss" for r in kept),
        "bytes": len(text.encode()),
        "bytes_kept": len(thinned.getvalue().encode()),
    }


def child(n_sims: int) -> dict[str, Any]:
    """`study` then `measure`, in a fresh process (a fresh torch and launcher)."""
    with tempfile.TemporaryDirectory(prefix="draws_log_size_") as tmp:
        cmd = [sys.executable, __file__, "--child", str(n_sims), "--out", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(
                f"study of {n_sims} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        return {"n_sims": n_sims, **measure(Path(tmp) / "study" / "draws.csv")}


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--n_sims", nargs="+", type=int, default=[24, 48, 96])
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    add_flags(p, quick="12 simulations: checks the pipeline, no figures")
    opts = p.parse_args()
    if opts.child:
        return study(opts.child, opts.out)
    sizes = [12] if opts.quick else opts.n_sims
    runs = [child(n) for n in sizes]
    for run in runs:
        print(to_json(run), file=sys.stderr, flush=True)
    rows = []
    for r in runs:
        for what, ours, base, unit in (
            ("loss rows", r["loss_rows_kept"], r["loss_rows"], "rows"),
            ("bytes", r["bytes_kept"], r["bytes"], "bytes"),
        ):
            rows.append({
                "case": f"draws.csv {what}, {r['n_sims']} simulations", "ours": ours,
                "baseline": base, "unit": unit, "ratio": base / max(ours, 1), "target": 1.0,
            })  # fmt: skip
    notes = [
        f"{r['n_sims']} simulations: {r['loss_rows']} loss rows for {r['draws']} draws "
        f"without the skip ({r['loss_rows'] / r['draws']:.1f} per draw)"
        for r in runs
    ]
    finish(rows, "draws.csv with and without the loss skip", 40, as_json=opts.json, notes=notes)
    return None


if __name__ == "__main__":
    main()
