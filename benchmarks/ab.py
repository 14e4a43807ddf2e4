"""A/B of benchmarks between two versions of the code: does a change make a row worse?

Each benchmark is run under the base revision (a temporary git worktree of `--base`)
and under this working tree, alternately, `--rounds` times (base, head; then head,
base; ...), each run in its own process with its own version's benchmark script
(``PYTHONPATH`` set to that version: the package and the script measured together),
and with ``--json``. For every row the two versions share (by ``case``), it prints the
median of each version's per-run ``ratio`` (the benchmark's own figure against its
own baseline measured in the same run, so that the machine's drift cancels) and every
run's value; ``change`` = head / base (higher is better, as ratios are).

    python benchmarks/ab.py --base 99d62f5 --rounds 3 \\
        "trainer_overhead.py --quick" "buffers.py --quick" "stream_latency.py"
    python benchmarks/ab.py --base main --json "fan_in.py --quick"   # {"rows": [...]}
    python benchmarks/ab.py --base main --head_scripts "trainer_overhead.py --quick"

With `--head_scripts`, both versions run this tree's benchmark scripts (``PYTHONPATH``
still picks the package): the package's change alone, measured by rows that the base's
script may lack.

The runs' raw JSON lines are kept under `--keep` (a folder) when given. Run it on an
idle machine: it measures whatever else the machine does too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from melissa_trainer.common.json_output import to_json

ROOT = Path(__file__).resolve().parents[1]


def run(
    tree: Path, bench: str, timeout: float, scripts: Path | None = None
) -> list[dict[str, Any]]:
    """One run of `bench` ("script.py --flags") in `tree` with ``--json``; its rows.
    `scripts`: the tree whose benchmark script runs (default `tree`'s own)."""
    script, *flags = shlex.split(bench)
    cmd = [sys.executable, str((scripts or tree) / "benchmarks" / script), *flags, "--json"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{bench} in {tree} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    last = proc.stdout.strip().splitlines()[-1]
    rows: list[dict[str, Any]] = json.loads(last)["rows"]
    return rows


def ratio_of(row: dict[str, Any]) -> float:
    value = row.get("ratio")
    return float(value) if isinstance(value, (int, float)) else math.nan


def median(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def compare(
    base: Path, head: Path, benches: list[str], rounds: int, timeout: float, keep: Path | None,
    head_scripts: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every bench under both trees, alternately; the table's rows. `head_scripts`: both
    versions of the package run this tree's benchmark scripts (rows the base's lack)."""
    runs: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in range(rounds):
        for bench in benches:
            order = [("base", base), ("head", head)]
            for name, tree in order if r % 2 == 0 else order[::-1]:
                rows = run(tree, bench, timeout, head if head_scripts else None)
                if keep is not None:
                    tag = shlex.split(bench)[0].removesuffix(".py")
                    (keep / f"{tag}.{name}.{r + 1}.json").write_text(to_json({"rows": rows}))
                for row in rows:
                    key = (shlex.split(bench)[0], str(row["case"]))
                    runs.setdefault(key, {"base": [], "head": []})[name].append(ratio_of(row))
                print(f"round {r + 1} {bench} {name}: {len(rows)} rows", file=sys.stderr)
    table = []
    for (bench, case), values in runs.items():
        b, h = median(values["base"]), median(values["head"])
        table.append({
            "case": f"{bench}: {case}", "ours": h, "baseline": b, "unit": "ratio",
            "ratio": h / b if b and not math.isnan(b) else math.nan, "target": None,
            "base_runs": values["base"], "head_runs": values["head"],
        })  # fmt: skip
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benches", nargs="+", help='e.g. "buffers.py --quick" (quoted)')
    parser.add_argument("--base", default="main", help="git revision to compare against")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--keep", type=Path, help="folder for every run's rows")
    parser.add_argument("--json", action="store_true", help='print {"rows": [...]} last')
    parser.add_argument("--head_scripts", action="store_true", help=(
        "run this tree's benchmark scripts under both versions of the package (a row the "
        "base's script lacks; the package's change alone)"))  # fmt: skip
    args = parser.parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ab-base-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base],
            check=True, capture_output=True,
        )  # fmt: skip
        try:
            table = compare(base, ROOT, args.benches, args.rounds, args.timeout, args.keep,
                            args.head_scripts)  # fmt: skip
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                check=False, capture_output=True,
            )  # fmt: skip
    print(f"{'case':80s} {'base':>7s} {'head':>7s} {'change':>7s}  runs base | head")
    for row in table:
        runs = " ".join(f"{v:.3f}" for v in row["base_runs"])
        runs += " | " + " ".join(f"{v:.3f}" for v in row["head_runs"])
        print(
            f"{row['case'][:80]:80s} {row['baseline']:7.3f} {row['ours']:7.3f} "
            f"{row['ratio']:7.3f}  {runs}"
        )
    if args.json:
        print(to_json({"rows": table}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
