"""benchmarks/tracking_step.py: the tracked step's extra CPU, a tracked trainer against an
untracked one side by side, this code against a baseline package; the two trainers must
end with the same weights (a baseline whose tracking changes the training is refused)."""

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
def test_the_tracking_step_benchmark_compares_two_codes(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCHMARKS / "tracking_step.py"), "--quick", "--json"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=280, check=True,
                         cwd=tmp_path).stdout  # fmt: skip
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert len(rows) == 2 and rows[0]["unit"] == "us/step" and rows[0]["target"] == 2.0
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
    assert 0.5 < rows[1]["ours"] < 2.0 and 0.5 < rows[1]["baseline"] < 2.0  # on / off rates
    # a baseline whose tracked step trains on another loss (the fused loss of the first
    # sample's elements only): its trainers' weights differ, and the run stops
    base = tmp_path / "base"
    shutil.copytree(PACKAGE, base / "melissa_trainer")
    path = base / "melissa_trainer" / "core" / "sample_losses.py"
    source = path.read_text()
    marker = "    return elementwise.sum() / n, elementwise.detach()"
    assert marker in source
    other = "    return elementwise[:1].sum() / n, elementwise.detach()"
    path.write_text(source.replace(marker, other))
    failed = subprocess.run([*command, "--baseline", str(base)], capture_output=True,
                            text=True, timeout=280, check=False, cwd=tmp_path)  # fmt: skip
    assert failed.returncode != 0 and "weights differ" in failed.stderr
    assert str(base.resolve()) in failed.stdout  # (the baseline it was told)
