"""How big does a study's ``draws.csv`` grow, and how much does its loss rule save
(`launcher.loss_rows`: a ``loss`` row only when the loss moved by more than 10% of the
last written, `LOSS_CHANGE`, and, once it swung back and forth, no sooner than a gap of
draws that doubles at each swing)? On real studies of the heat example, and on a
planted swinging loss.

Each heat study runs the heat example (`examples/heat_pde/train.py`, in this process
through `runpy`) with the surrogate sampler, training while the study draws (reservoir
buffer, ``--sample_to_insert_ratio 4``, ``--simulation_loss_steps 5``), with the rule
off (every loss handed to the sampler gets a row, as before any skip). Its file's rows
are then replayed through the library's `DrawLog` (ours) and through the 10% skip alone
(`loss_changed`: the rule before the gap): the rows each writes for that same sequence
of losses. A paired comparison (one study per size: the losses that reach the sampler
depend on the machine's load, the rule on the sequence alone). The swinging case: n
simulations, each draw handing the sampler the newest loss of every one drawn so far,
each loss swinging between 1 and 2 (a noisy loss moves by more than 10% each time).
Rows: per size, loss rows and bytes with the rule (ours) and without (baseline), loss
rows with the rule and with the 10% skip alone (baseline), ratio baseline / ours.

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
    from melissa_trainer.launcher import loss_rows

    loss_rows.LossRows.keep = _every  # type: ignore[method-assign]  # (the file before any skip)
    sys.argv = [str(HEAT), "--num_simulations", str(n_sims), "--output_dir", out, *FLAGS]
    runpy.run_path(str(HEAT), run_name="__main__")


def _every(self: Any, sid: int, loss: float) -> bool:
    """Every loss handed to the sampler gets a row (`LossRows.keep`, replaced)."""
    return True


def _replay(header: list[str], body: list[list[str]], path: Path) -> None:
    """The rows `DrawLog` writes at `path` for the events of `body` (a file's rows
    under `header`, every loss in it): its draws, each loss as observed, its given-up rows."""
    from melissa_trainer.launcher.draw_log import _FIXED, DrawLog

    columns = header[2:-3]  # (the parameters', renamed on a clash: `DrawLog.columns`)
    names = [c[6:] if c.startswith("param_") and c[6:] in _FIXED else c for c in columns]
    log = DrawLog.open(path, names)
    for row in body:
        sid, event = int(row[0]), row[1]
        if event == "draw":
            values = dict(zip(names, map(float, row[2:-3]), strict=True))
            log.drew(sid, values, row[-3], int(row[-2]) if row[-2] else None)
        elif event == "loss":
            log.observed({sid: float(row[-1])})
        else:
            log.gave_up(sid, event)
    log.close()


def measure(path: Path) -> dict[str, Any]:
    """The file's rows and bytes (every loss in it), those the library's rule writes of
    the same events (`_replay`: kept), and those of the 10% skip alone (ten)."""
    from melissa_trainer.launcher.loss_rows import loss_changed

    text = path.read_bytes().decode()  # (read_text would turn its \r\n into \n)
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    event, loss = header.index("event"), header.index("loss")
    last: dict[str, float] = {}
    ten = []
    for row in body:
        if row[event] == "loss":
            value = float(row[loss])
            if not loss_changed(last.get(row[0]), value):
                continue
            last[row[0]] = value
        ten.append(row)
    with tempfile.TemporaryDirectory(prefix="draws_log_replay_") as tmp:
        _replay(header, body, Path(tmp) / "draws.csv")
        kept_text = (Path(tmp) / "draws.csv").read_bytes().decode()
    kept = list(csv.reader(io.StringIO(kept_text)))[1:]
    return {
        "draws": sum(r[event] == "draw" for r in body),
        "loss_rows": sum(r[event] == "loss" for r in body),
        "loss_rows_ten": sum(r[event] == "loss" for r in ten),
        "loss_rows_kept": sum(r[event] == "loss" for r in kept),
        "bytes": len(text.encode()),
        "bytes_kept": len(kept_text.encode()),
    }


def swinging(n_sims: int) -> dict[str, Any]:
    """`measure` of a planted study of `n_sims`: each draw hands the sampler every drawn
    simulation's newest loss, swinging between 1.0 and 2.0 (every loss given a row)."""
    from melissa_trainer.launcher.draw_log import DrawLog

    with tempfile.TemporaryDirectory(prefix="draws_log_swing_") as tmp:
        log = DrawLog.open(Path(tmp) / "draws.csv", ["x"])
        log._rule.keep = _every.__get__(log._rule)  # type: ignore[method-assign]
        for i in range(n_sims):
            log.drew(i, {"x": i / n_sims}, "uniform", None)
            log.observed({sid: 1.0 if (i + sid) % 2 else 2.0 for sid in range(i + 1)})
        log.close()
        return {"n_sims": n_sims, **measure(Path(tmp) / "draws.csv")}


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
    swings = [swinging(n) for n in sizes]
    for run in runs + swings:
        print(to_json(run), file=sys.stderr, flush=True)
    rows = []
    for r, w in zip(runs, swings, strict=True):
        n = r["n_sims"]
        for what, ours, base, unit in (
            (f"loss rows, {n} simulations", r["loss_rows_kept"], r["loss_rows"], "rows"),
            (f"bytes, {n} simulations", r["bytes_kept"], r["bytes"], "bytes"),
            (f"loss rows vs the 10% skip alone, {n} simulations", r["loss_rows_kept"],
             r["loss_rows_ten"], "rows"),
            (f"loss rows vs the 10% skip alone, swinging loss, {n} simulations",
             w["loss_rows_kept"], w["loss_rows_ten"], "rows"),
        ):  # fmt: skip
            rows.append({
                "case": f"draws.csv {what}", "ours": ours, "baseline": base, "unit": unit,
                "ratio": base / max(ours, 1), "target": 1.0,
            })  # fmt: skip
    notes = [
        f"{r['n_sims']} simulations: {r['loss_rows']} loss rows for {r['draws']} draws "
        f"without the skip ({r['loss_rows'] / r['draws']:.1f} per draw)"
        for r in runs
    ]
    finish(rows, "draws.csv with and without the loss rule", 60, as_json=opts.json, notes=notes)
    return None


if __name__ == "__main__":
    main()
