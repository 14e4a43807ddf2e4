"""benchmarks/client_finite_check.py end to end with tiny settings: every row is there
and well formed, the ratio as the row's figures say. No speed is asserted: the figures
are for people to read (docs/measured.md)."""

from __future__ import annotations

import pytest
from benchmark_json import assert_rows_well_formed, json_rows

pytestmark = pytest.mark.e2e  # every test here starts a process

CASES = [
    "sender CPU per send (0.25 MiB float32): check / no check",
    "all_finite alone (0.25 MiB float32)",
]


@pytest.mark.timeout(120)
def test_tiny_json_gives_every_row_well_formed() -> None:
    flags = ("--rounds", "1", "--messages", "5", "--bytes", str(1 << 18))
    rows = json_rows("client_finite_check.py", *flags, timeout=110)
    assert [r["case"] for r in rows] == CASES
    assert_rows_well_formed(rows, "us")
