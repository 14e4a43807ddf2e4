"""benchmarks/surrogate_cost.py's measurement design (issue 46, ninth round): the A/A
spread's statistics against figures worked out by hand, the reference step (its own
model, its CPU kept out of the study's), and ``--aa`` in quick mode end to end (a pair's
two studies in one process, the second replaying the first's draws). No rate is
asserted: the figures are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _module(name: str) -> ModuleType:  # benchmarks/ is not a package
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_spread_of_identical_arms_is_nil() -> None:
    spread = _module("cost_spread").spread([3.0, 5.0, 7.0], [3.0, 5.0, 7.0], resamples=50)
    assert spread == {"pairs": 3, "median": 0.0, "mad": 0.0, "p5": 0.0, "p95": 0.0,
                      "row_sd": 0.0, "pair_sd": 0.0}  # fmt: skip


def test_the_spread_s_figures_by_hand() -> None:
    """Log-ratios 0, ln 2, ln 4: median ln 2, deviations ln 2, 0, ln 2 (MAD ln 2); the
    5% quantile 0.1 of the way from 0 to ln 2, the 95% 0.9 of the way from ln 2 to ln 4."""
    cs = _module("cost_spread")
    s = cs.spread([1.0, 2.0, 4.0], [1.0, 1.0, 1.0], resamples=200)
    ln2 = math.log(2)
    assert s["median"] == pytest.approx(100 * ln2)
    assert s["mad"] == pytest.approx(100 * ln2)
    assert s["p5"] == pytest.approx(100 * 0.1 * ln2)
    assert s["p95"] == pytest.approx(100 * 1.9 * ln2)
    assert s["row_sd"] > 0 and s["pair_sd"] > 0  # resampled pairs differ
    assert cs.quantile([4.0, 1.0, 2.0, 3.0], 0.5) == 2.5


def test_the_reference_trains_its_own_copy_and_counts_its_cpu() -> None:
    reference_module = _module("step_reference")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.SiLU(), torch.nn.Linear(8, 5))
    before = [p.detach().clone() for p in model.parameters()]
    reference = reference_module.StepReference(model, batch_size=4, steps=2)
    assert reference.rate == 0.0
    reference.run()
    reference.run()
    assert reference.count == 4 and reference.seconds > 0
    assert reference.rate == pytest.approx(4 / reference.seconds)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    moved = [not torch.equal(a, b) for a, b in zip(before, reference.model.parameters(),
                                                   strict=True)]  # fmt: skip
    assert all(moved)  # it trained, its copy
    assert reference.x.shape == (4, 3) and reference.y.shape == (4, 5)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_a_a_pair_in_one_process_runs_and_reports_its_spread(tmp_path: Path) -> None:
    """--aa off --quick with the in-process design: one pair, both studies in one child
    process (the second replays the list the first did), a row per rate."""
    command = [sys.executable, str(BENCHMARKS / "surrogate_cost.py"), "--quick", "--json",
               "--aa", "off", "--designs", "ref-inproc", "--pairs", "1"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=560, check=True,
                         cwd=tmp_path).stdout  # fmt: skip
    assert "A/A off pair 0, ref-inproc: a / b span " in out
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    rates = _module("cost_spread").RATES
    assert len(rows) == len(rates)
    for row, name in zip(rows, rates, strict=True):
        assert row["case"].startswith(f"A/A off, ref-inproc, {name}: ")
        assert row["unit"] == "%" and row["ours"] == 0.0  # one pair: no deviation
