"""benchmarks/divergence_alarms.py: its families never diverge and its jumps are what
they say (the oracle: the series themselves), its rows are well formed, and its
baseline is the rule before the sharp-jump clause (the level clause alone: on series
without validations or learning rates, `diverged` without the jump)."""

from __future__ import annotations

import math
from statistics import median

import pytest
from benchmark_json import ROW_KEYS, benchmark_module, json_rows

pytestmark = pytest.mark.timeout(120)


def test_the_families_are_plateaus_and_their_rows_are_well_formed() -> None:
    bench = benchmark_module("divergence_alarms")
    for family in bench.FAMILIES:
        losses = bench.series(1000, family)
        assert len(losses) == bench.LOGS and min(losses) > 0
        # never diverging: the last 10 logs' level within 10 times the first 10 logs' one
        assert median(losses[-10:]) < 10 * median(losses[:10]), family
    rows = bench.rows(range(1000, 1010))
    assert len(rows) == len(bench.FAMILIES) * (1 + len(bench.JUMPS))
    for r in rows:
        assert set(r) == ROW_KEYS and r["unit"] == "of 10", r
        assert 0 <= r["ours"] <= 10 and 0 <= r["baseline"] <= 10 and math.isfinite(r["ratio"])
        # the jump adds warnings, it takes none away
        assert r["ours"] >= r["baseline"], r


@pytest.mark.e2e
def test_the_command_gives_its_rows() -> None:
    rows = json_rows("divergence_alarms.py", "--quick", timeout=100)
    assert [r["case"] for r in rows][:2] == [
        "false_alarms_lognormal_0.8",
        "detect_lognormal_0.8_10x_last1",
    ]
    assert all(r["unit"] == "of 20" for r in rows)
