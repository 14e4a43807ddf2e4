"""benchmarks/ab.py: a benchmark run alternately under a base revision and this tree."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

ROOT = Path(__file__).resolve().parents[2]
BENCH = "stream_latency.py --rounds 1 --steps 30 --period 0.001"  # ~2 s a run


@pytest.mark.timeout(300)
def test_both_versions_run_alternately_and_every_shared_row_is_compared(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout (ab.py makes a worktree of the base)")
    keep = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ab.py"), "--base", "HEAD", "--rounds", "2",
         "--keep", str(keep), "--json", BENCH],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])["rows"]
    # the oracle: each version's own runs, kept as the benchmark printed them
    runs = {
        (name, r): json.loads((keep / f"stream_latency.{name}.{r}.json").read_text())["rows"]
        for name in ("base", "head")
        for r in (1, 2)
    }
    cases = {row["case"] for row in runs[("head", 1)]}
    assert {row["case"] for row in rows} == {f"stream_latency.py: {c}" for c in cases}
    for row in rows:
        case = row["case"].removeprefix("stream_latency.py: ")
        for name, key in (("base", "base_runs"), ("head", "head_runs")):
            expected = [
                next(x["ratio"] for x in runs[(name, r)] if x["case"] == case) for r in (1, 2)
            ]
            assert row[key] == expected  # (null where the benchmark had no ratio)
        for name, key in (("baseline", "base_runs"), ("ours", "head_runs")):
            finite = [v for v in row[key] if v is not None]  # medians of each side's runs
            assert row[name] == (statistics.median(finite) if finite else None)
        if row["baseline"] is not None and row["ours"] is not None:
            assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"])
    # alternation: base first in round 1, head first in round 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("round")]
    order = [line.split()[-3].rstrip(":") for line in lines]
    assert order == ["base", "head", "head", "base"]
