"""benchmarks/sampler_parts.py: the density sampler's CPU per replayed study, this code
against a baseline package, in alternating interpreters; their draws compared (a
baseline whose draws differ stops the run with an error)."""

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
def test_the_sampler_parts_benchmark_compares_two_codes(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCHMARKS / "sampler_parts.py"), "--quick", "--json"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=280, check=True,
                         cwd=tmp_path).stdout  # fmt: skip
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert len(rows) == 3 and "draws" in rows[0]["case"] and "observations" in rows[1]["case"]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and row["unit"] == "ms"
    # a baseline whose draws differ (a finer grid): refused, not timed
    base = tmp_path / "base"
    shutil.copytree(PACKAGE, base / "melissa_trainer",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    warp = base / "melissa_trainer" / "launcher" / "density_warp.py"
    source = warp.read_text()
    assert "GRID = 256\n" in source
    warp.write_text(source.replace("GRID = 256\n", "GRID = 255\n"))
    failed = subprocess.run([*command, "--baseline", str(base)], capture_output=True,
                            text=True, timeout=280, check=False, cwd=tmp_path)  # fmt: skip
    assert failed.returncode != 0 and "draws differ" in failed.stderr
    assert str(base) in failed.stderr  # the baseline's package was the one imported
