"""benchmarks/fno_feed.py at a small grid: its figures are consistent with each other
(the arithmetic the docs quote) and its traffic counter counts what it says."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "fno_feed.py"


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_estimate_is_consistent() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--grid", "32", "--count_batch", "1", "--json"],
        capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["grid"] == 32 and got["batch"] == 16
    assert got["solver_cpu_ms_per_step"] > 0 and got["step_gb_moved_lower_bound"] > 0
    h100, h200 = got["gpus"]["H100 SXM"], got["gpus"]["H200"]
    # the same bytes at 3.35 and 4.8 TB/s
    assert h100["step_ms"] / h200["step_ms"] == pytest.approx(4.8 / 3.35, rel=0.1)
    for gpu in (h100, h200):
        fast, slow = gpu["intervals"]["0.125"], gpu["intervals"]["0.5"]
        assert fast["fields_per_s_per_simulation"] == pytest.approx(
            4 * slow["fields_per_s_per_simulation"], rel=0.01
        )  # 20 solver steps a field against 80
        need = gpu["draws_per_s"] / slow["fields_per_s_per_simulation"]
        assert slow["simulations_for_one_draw_per_sample"] == pytest.approx(math.ceil(need), abs=1)


def test_the_traffic_counter_counts_inputs_and_outputs_not_views() -> None:
    # it imports the example's modules as `navier_stokes.*`: nothing to set aside
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    import fno_feed
    import torch

    a, b = torch.ones(1000), torch.ones(1000)
    with fno_feed.Traffic() as traffic:
        c = a + b  # 3 x 4 KB
        c.view(10, 100).t()  # views: nothing moved
    assert (traffic.ops, traffic.bytes) == (1, 12_000)
