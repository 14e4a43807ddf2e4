"""Runs a script of benchmarks/ as its tests do: in a fresh interpreter, with ``--json``,
and returns the rows it printed (its last line, ``{"rows": [...]}``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def json_rows(script: str, *flags: str, timeout: float = 280) -> list[dict[str, Any]]:
    """The rows of ``python benchmarks/SCRIPT *FLAGS --json``; a non-zero exit raises
    `subprocess.CalledProcessError` (with the script's stderr), a run longer than
    `timeout` seconds `subprocess.TimeoutExpired` (the process killed)."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *flags, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
    return rows
