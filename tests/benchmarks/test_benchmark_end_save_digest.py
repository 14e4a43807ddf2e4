"""benchmarks/end_save_digest.py in quick mode gives its rows, well formed, and a save's
digest far cheaper than the baseline's (the source's record not serialized again: a
dictionary lookup against a JSON dump of 10^4 simulations' record, a margin no load on
the machine closes). The other figures are for people to read."""

from __future__ import annotations

import math

import pytest
from benchmark_json import json_rows

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_command_prints_its_rows() -> None:
    rows = json_rows("end_save_digest.py", "--quick", "--rounds", "1", timeout=170)
    assert len(rows) == 6
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"])
    save = next(r for r in rows if r["case"] == "digest at a save, 10,000 simulations")
    assert save["ratio"] > 10
