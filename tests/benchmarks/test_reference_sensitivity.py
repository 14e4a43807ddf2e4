"""benchmarks/reference_sensitivity.py: a tracked and an untracked trainer, each with the
reference step of `surrogate_cost.py`; the on arm must track (else it is refused)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "reference_sensitivity.py"


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.parametrize("reference", [[], ["--reference", "compute", "--offset", "5"]])
def test_the_reference_sensitivity_benchmark_runs_a_tracked_and_an_untracked_trainer(
    tmp_path: Path, reference: list[str]
) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", *reference],
                         capture_output=True, text=True, timeout=280, check=True,
                         cwd=tmp_path).stdout  # fmt: skip
    assert "reductions on" in out and " 0 reductions on" not in out
    kind, offset = ("compute", 5) if reference else ("step", 0)
    assert f"the {kind!r} reference at offset {offset}" in out
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert [r["unit"] for r in rows] == ["ratio", "ratio"]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["target"] is None and 0.3 < row["ratio"] < 3.0
