"""benchmarks/ns_dt_scaling.py in its quick mode, in this interpreter: one well-formed
row, the figure the how-to quotes for 128^2 (docs/how-to/neural-operator.md,
``--grid_size``: 0.09%). The solver is deterministic, so the figure is too (0.085% on
2026-12-05); `tests/examples/test_example_navier_stokes_solver.py` bounds it at 0.5%."""

from __future__ import annotations

import pytest
from benchmark_json import ROW_KEYS, benchmark_module


@pytest.mark.timeout(120)
def test_quick_gives_the_pages_128_figure() -> None:
    (row,) = benchmark_module("ns_dt_scaling").measure(quick=True)
    assert set(row) == ROW_KEYS, row
    assert row["case"] == "pooled_128" and row["unit"] == "%"
    assert round(row["ours"], 2) == 0.09  # the page's "0.09% at 128²"
