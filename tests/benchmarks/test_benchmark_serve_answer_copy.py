"""benchmarks/serve_answer_copy.py end to end with tiny settings: its ``--json`` rows are
the benchmarks' rows (``case``, ``ours``, ``baseline``, ``unit``, ``ratio``,
``target``), the ratio the one its figures give (answers per second: ours / baseline,
higher is better). Found in review (hrev13): its rows had keys of their own
(``output_bytes``, ``copied_answers_per_s``, ...). No speed is asserted."""

from __future__ import annotations

import math

import pytest
from benchmark_json import ROW_KEYS, json_rows

pytestmark = pytest.mark.e2e  # (it starts a client process per arm)


@pytest.mark.timeout(180)
def test_tiny_json_gives_the_benchmarks_rows() -> None:
    rows = json_rows("serve_answer_copy.py", "--rounds", "1", "--answers", "40",
                     "--sizes", "65536", timeout=170)  # fmt: skip
    assert [r.get("case") for r in rows] == ["answers of 65536 B: copied vs zero-copy (before)"]
    for r in rows:
        assert set(r) == ROW_KEYS, r
        assert r["unit"] == "answers/s" and r["target"] is None, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["ratio"] == pytest.approx(r["ours"] / r["baseline"], rel=0.01), r
