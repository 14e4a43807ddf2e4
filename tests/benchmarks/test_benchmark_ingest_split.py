"""benchmarks/ingest_split.py --quick: it runs, and splits the training thread's CPU per
step into its rows (the figures themselves are timings, not asserted; how they add up
is)."""

from __future__ import annotations

import pytest
from benchmark_json import json_rows

pytestmark = pytest.mark.e2e  # it starts a process (and a streaming client)


@pytest.mark.timeout(300)
def test_ingest_split_quick_prints_the_training_threads_cpu_by_part() -> None:
    rows = json_rows("ingest_split.py", "--quick")
    parts = [r["case"].split(": ", 1)[1] for r in rows]
    assert parts == [
        "in all (baseline: alone)",
        "the receiver's pumps, in all (baseline: a step alone)",
        "  the buffer's puts in them (put_available) (baseline: a step alone)",
        "  the receiver's own (pumps less puts) (baseline: a step alone)",
        "the buffer's draws (get_batch), beyond alone's (baseline: a step alone)",
        "the rest of the difference with alone (baseline: a step alone)",
    ]
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert r["unit"] == "us/step" and r["baseline"] > 0
    total, pumps, puts, own = (r["ours"] for r in rows[:4])
    # the stream was received in the training thread, and the parts add up
    assert total > 0 and pumps > 0 and 0 < puts < pumps
    assert own == pytest.approx(pumps - puts, abs=0.2)
