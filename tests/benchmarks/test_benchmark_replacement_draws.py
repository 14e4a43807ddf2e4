"""benchmarks/replacement_draws.py: ours and the baseline on the same seeds, every row
of both regions, strict JSON last. The oracle for one row: the failures of the
baseline's studies counted here by replaying them (a sampler told nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer.launcher import DensitySampler

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]  # it starts a process

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_run_prints_every_row_and_the_baseline_s_failures() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "replacement_draws.py"), "--quick", "--json"],
        capture_output=True, text=True, timeout=280, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = {row["case"]: row for row in out["rows"]}
    assert out["seeds"] == 5 and len(rows) == 6
    assert all(set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}
               for r in rows.values())  # fmt: skip
    counted = []
    for seed in range(5):  # the baseline: the next design's points, failing where p0 > 0.8
        sampler = DensitySampler({f"p{i}": (0.0, 1.0) for i in range(6)}, seed)
        good = failures = 0
        sampler.plan(12)
        while good < 12:
            p = sampler.draw()
            failures, good = (failures + 1, good) if p["p0"] > 0.8 else (failures, good + 1)
        counted.append(failures)
    assert rows["slab p0 > 0.8, n=12: failures"]["baseline"] == pytest.approx(np.mean(counted))
