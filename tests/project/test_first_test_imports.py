"""The test processes import torch and accelerate at configuration, before any test:
pytest-timeout counts a test's fixtures' set-up, and the autouse fixtures that import
them made the first test of a process pay them (20 s at load 8 on 2 cores:
test_signal_when.py's 30 s timeout ran out when it came first in a narrow run, twice
in one session). The probe module, run alone, records what was imported when it was
collected (after `pytest_configure`, before any set-up)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(300), pytest.mark.e2e]

PROBE = Path(__file__).parent / "probes" / "first_test_imports.py"


@pytest.mark.parametrize("workers", ["0", "1"])
def test_the_first_test_pays_no_heavy_import(workers: str) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            workers,
            "--durations=0",
            str(PROBE),
        ],  # fmt: skip
        cwd=PROBE.parents[3],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout, done.stdout[-3000:]
