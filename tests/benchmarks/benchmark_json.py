"""Runs a script of benchmarks/ as its tests do: in a fresh interpreter, with ``--json``,
and returns the rows it printed (its last line, ``{"rows": [...]}``); the checks every
A/B row passes whatever the machine's speed; and a benchmark's module imported in the
test's own interpreter (`benchmark_module`)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
ROW_KEYS = {"case", "ours", "baseline", "unit", "ratio", "target"}


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` imported (benchmarks/ is not a package: its directory is on
    ``sys.path`` for the import only; the modules it imports stay imported)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def json_rows(script: str, *flags: str, timeout: float = 280) -> list[dict[str, Any]]:
    """The rows of ``python benchmarks/SCRIPT *FLAGS --json``; a non-zero exit fails the
    test with the end of the script's stderr, a run longer than `timeout` seconds raises
    `subprocess.TimeoutExpired` (the process killed)."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *flags, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
    return rows


def assert_rows_well_formed(rows: list[dict[str, Any]], unit: str) -> None:
    """Every row has the benchmarks' keys, `unit`, no target, finite positive figures
    and the ratio its figures give (baseline / ours: lower is better)."""
    for r in rows:
        assert set(r) == ROW_KEYS, r
        assert r["unit"] == unit and r["target"] is None, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01), r
