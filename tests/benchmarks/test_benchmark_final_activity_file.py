"""benchmarks/final_activity_file.py: ``--quick --json`` prints its four rows per
pattern (write, parse, rank 0's parses, size) as strict JSON; the script stops when a
file read back differs from the samples written, so a run that ends well also says both
formats round-trip. No time is asserted: the figures are for people to read."""

from __future__ import annotations

import math

import pytest
from benchmark_json import ROW_KEYS, json_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]  # it starts a process


def test_the_quick_run_prints_its_rows() -> None:
    rows = json_rows("final_activity_file.py", "--quick")
    assert [r["case"] for r in rows] == [
        f"n=1000 {pattern}: {what}"
        for pattern in ("uniform", "alternating")
        for what in ("write", "parse", "rank 0's parses", "size")
    ]
    for r in rows:
        assert set(r) == ROW_KEYS and r["target"] is None, r
        assert r["unit"] == ("bytes" if r["case"].endswith("size") else "ms"), r
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("ours", "baseline", "ratio")), r
    sizes = {r["case"]: r for r in rows if r["unit"] == "bytes"}
    assert sizes["n=1000 uniform: size"]["ours"] < 100  # (one run line)
