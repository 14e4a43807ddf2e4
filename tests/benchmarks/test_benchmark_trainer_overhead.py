"""benchmarks/trainer_overhead.py --quick: every case runs, the heat workload's included
(it failed from the day `heat_pipelines.online_trainer` gained an ingest transform, which the
benchmark's own prefilled source refused), and prints its rows (the figures are
timings, not asserted). One round of 40 steps a case (``--quick``'s are 3 of 200): what is
checked is that each case runs and says positive figures, which the first steps do (40:
two of the per-simulation losses' reductions, every 20 steps)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # it starts a process

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "trainer_overhead.py"
#: every single-process case, each one round of 40 steps (see the docstring)
FLAGS = ["--quick", "--no-ddp", "--rounds", "1", "--steps", "40"]


@pytest.mark.timeout(600)
def test_trainer_overhead_quick_runs_every_single_process_case() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *FLAGS, "--json"],
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    rows = json.loads(out.stdout.strip().splitlines()[-1])["rows"]
    assert any("heat" in r["case"] for r in rows), [r["case"] for r in rows]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert r["ours"] > 0 and r["baseline"] > 0
