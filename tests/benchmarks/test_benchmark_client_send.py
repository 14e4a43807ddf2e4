"""benchmarks/client_send.py end to end with tiny settings, against this checkout's own
HEAD as the base: every row is there and well formed, the ratio as the row's figures
say, and each arm imported the package it names (the benchmark checks it). No speed
is asserted: the figures are for people to read."""

from __future__ import annotations

import pytest
from benchmark_json import assert_rows_well_formed, json_rows

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.timeout(180)
def test_tiny_json_gives_every_row_well_formed() -> None:
    rows = json_rows("client_send.py", "--rounds", "1", "--messages", "5", "--base", "HEAD",
                     timeout=170)  # fmt: skip
    sizes = ("1 KB", "1 MiB", "16 B unbatched")
    assert [r["case"] for r in rows] == [
        f"sender CPU per Client.send ({size} float32): ours vs HEAD" for size in sizes
    ]
    assert_rows_well_formed(rows, "us")
