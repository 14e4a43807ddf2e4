"""benchmarks/client_startup.py end to end with tiny settings (2 launches of each arm of a
4 KiB field): every row is there and well formed, the ratios as the rows' figures say.
No speed is asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "client_startup.py"
CASES = {
    "start-up to first sent step (4 KiB): bare numpy+zmq / ours": 0.8,
    "import: `import numpy, zmq` / the client": None,
    "import, CPU time: `import numpy, zmq` / the client": None,
    "connect + first send (4 KiB) to its arrival": None,
}


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_quick_json_gives_every_row_well_formed(tmp_path: Path) -> None:
    command = [sys.executable, str(BENCHMARK), "--quick", "--json", "--launches", "2",
               "--bytes", "4096", "--pycache", str(tmp_path / "pycache")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.splitlines()[-1])["rows"]
    assert {r["case"]: r["target"] for r in rows} == CASES
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        assert r["unit"] == "ms", r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        # times: higher is better as baseline / ours
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=0.01, abs=0.002), r
