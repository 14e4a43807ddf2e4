"""benchmarks/breed_first_draw.py: ``--quick --json`` prints the four rows of its budget
(the first draw, `plan` + `prepare`, both, and a resume to its first draw) as strict
JSON, ours and the baseline in milliseconds; the script stops when ours and the
baseline draw differently (or a resume otherwise than the uninterrupted sampler), so a
run that ends well also says their draws agree. No time is asserted: the figures are
for people to read."""

from __future__ import annotations

import pytest
from benchmark_json import assert_rows_well_formed, json_rows

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]  # it starts a process


def test_the_quick_run_prints_its_rows() -> None:
    rows = json_rows("breed_first_draw.py", "--quick")
    assert [r["case"] for r in rows] == [
        "n=16: first draw",
        "n=16: plan + prepare",
        "n=16: plan + prepare + first draw",
        "n=16: resume to its first draw",
    ]
    assert_rows_well_formed(rows, "ms")
