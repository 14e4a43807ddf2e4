"""benchmarks/stop_time.py end to end at its quick setting: every row well formed, and
the one bound a loaded machine cannot break: the baseline waits N graces in full (N
solvers that ignore SIGTERM, grace G: N x G at least). That ours does not is
tests/launcher/test_stop_kills_together.py's, by the order of events, not by a clock."""

from __future__ import annotations

import pytest
from benchmark_json import json_rows

pytestmark = pytest.mark.e2e  # every test here starts processes


@pytest.mark.timeout(240)
def test_quick_json_gives_its_rows_and_the_graces_overlap() -> None:
    rows = json_rows("stop_time.py", "--quick", timeout=200)
    assert [r["case"] for r in rows] == [
        "stop of 6 solvers that exit 1 s after SIGTERM, kill_grace 5 s",
        "stop of 6 solvers that ignore SIGTERM, kill_grace 1 s",
    ]
    for r in rows:
        assert r["unit"] == "s" and r["target"] == 3.0, r
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.02), r
    assert rows[1]["baseline"] >= 6 * 1.0  # (each grace waited in full, one by one)
