"""benchmarks/tracking_designs.py (issue 46, eleventh round): every variant trains the
same weights as the untracked one, bit for bit (the comparison is of the same work), and
the tracked variant's statistics are the library's; quick mode prints its rows. No rate
is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from benchmark_json import benchmark_module

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def test_the_variants_train_alike_and_the_tracked_one_tracks() -> None:
    td = benchmark_module("tracking_designs")
    arms = {v: td.Arm(v, 3) for v in td.VARIANTS}
    for arm in arms.values():
        arm.run(2 * td.PERIOD)
    off = list(arms["off"].model.parameters())
    for arm in arms.values():
        assert all(torch.equal(a, b) for a, b in zip(arm.model.parameters(), off, strict=True))
    tracked, mean = arms["tracked"].losses, arms["mean"].losses
    assert tracked.reductions == mean.reductions == 2 and len(tracked) > 0
    assert dict(tracked) == dict(mean)  # deferred or not: the same statistics


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_quick_prints_a_row_per_tracked_variant(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCHMARKS / "tracking_designs.py"), "--quick",
                          "--json"], capture_output=True, text=True, timeout=280, check=True,
                         cwd=tmp_path).stdout  # fmt: skip
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [r["case"].split(":")[0] for r in rows] == [
        f"tracked step, {v}" for v in ("fused", "take", "tracked", "mean")
    ]
    assert all(r["unit"] == "us/step" and r["target"] is None for r in rows)
