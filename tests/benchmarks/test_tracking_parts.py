"""benchmarks/tracking_parts.py: the tracking's parts on the training thread, this code
against a baseline package, timed on the same steps; its results compared bit for bit
(a run whose codes disagree stops with an error)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
PACKAGE = Path(__file__).parents[2] / "melissa_trainer"


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_tracking_parts_benchmark_compares_two_codes(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCHMARKS / "tracking_parts.py"), "--quick", "--json"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=280, check=True,
                         cwd=tmp_path).stdout  # fmt: skip
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [r["case"].split()[1] for r in rows] == ["losses", "record", "reduce", "feed", "total"]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and row["unit"] == "us/step"
    # a baseline whose per-sample losses differ (doubled): refused, not timed
    base = tmp_path / "base"
    (base / "core").mkdir(parents=True)
    for name in ("loss_per_simulation.py", "period_losses.py"):
        shutil.copy(PACKAGE / "core" / name, base / "core")
    (base / "launcher").mkdir()  # (the feed's part: the baseline's pending losses)
    shutil.copy(PACKAGE / "launcher" / "pending_losses.py", base / "launcher")
    source = (PACKAGE / "core" / "sample_losses.py").read_text()
    marker = "        return losses.mean(dim=1)"  # (`_per_sample_means`: deferred or not)
    assert marker in source
    doubled = source.replace(marker, "        return 2 * losses.mean(dim=1)")
    (base / "core" / "sample_losses.py").write_text(doubled)
    failed = subprocess.run([*command, "--baseline", str(base)], capture_output=True,
                            text=True, timeout=280, check=False, cwd=tmp_path)  # fmt: skip
    # (deferred by both codes: the reductions differ, not the step's losses)
    assert failed.returncode != 0 and "differ between the codes" in failed.stderr
