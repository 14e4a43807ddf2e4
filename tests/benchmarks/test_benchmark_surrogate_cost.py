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

import pytest
import torch
from benchmark_json import benchmark_module

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def test_the_spread_of_identical_arms_is_nil() -> None:
    spread = benchmark_module("cost_spread").spread([3.0, 5.0, 7.0], [3.0, 5.0, 7.0], resamples=50)
    assert spread == {"pairs": 3, "median": 0.0, "mad": 0.0, "p5": 0.0, "p95": 0.0,
                      "row_sd": 0.0, "pair_sd": 0.0}  # fmt: skip


def test_the_spread_s_figures_by_hand() -> None:
    """Log-ratios 0, ln 2, ln 4: median ln 2, deviations ln 2, 0, ln 2 (MAD ln 2); the
    5% quantile 0.1 of the way from 0 to ln 2, the 95% 0.9 of the way from ln 2 to ln 4."""
    cs = benchmark_module("cost_spread")
    s = cs.spread([1.0, 2.0, 4.0], [1.0, 1.0, 1.0], resamples=200)
    ln2 = math.log(2)
    assert s["median"] == pytest.approx(100 * ln2)
    assert s["mad"] == pytest.approx(100 * ln2)
    assert s["p5"] == pytest.approx(100 * 0.1 * ln2)
    assert s["p95"] == pytest.approx(100 * 1.9 * ln2)
    assert s["row_sd"] > 0 and s["pair_sd"] > 0  # resampled pairs differ
    assert cs.quantile([4.0, 1.0, 2.0, 3.0], 0.5) == 2.5


def test_the_reference_trains_its_own_copy_and_counts_its_cpu() -> None:
    reference_module = benchmark_module("step_reference")
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
    rates = benchmark_module("cost_spread").RATES
    assert len(rows) == len(rates)
    for row, name in zip(rows, rates, strict=True):
        assert row["case"].startswith(f"A/A off, ref-inproc, {name}: ")
        assert row["unit"] == "%" and row["ours"] == 0.0  # one pair: no deviation


def _study(rate: float, reference: float) -> dict[str, float]:
    return {"steps_per_step_cpu_second": rate, "reference_rate": reference,
            "steps_per_cpu_second": rate, "steps_per_second": rate}  # fmt: skip


def test_the_target_row_is_void_when_the_on_arm_moves_the_reference() -> None:
    """The control variate is read only while the reference's own rate stays within
    `REFERENCE_TOLERANCE` on / off; beyond it (the quiet machine's 0.920 and 0.878) the
    normalised row carries no ratio and no target, and the target falls back to the
    ratio of the arms' medians of the uncorrected rate (hand-worked: 705 / 725)."""
    cs = benchmark_module("cost_spread")
    offs = [_study(720.0, 1450.0), _study(730.0, 1460.0)]
    moved = cs.on_off_rows([_study(700.0, 1300.0), _study(710.0, 1320.0)], offs, "w, t", "d")
    assert moved[0]["ratio"] is None and moved[0]["target"] is None
    assert "VOID" in moved[0]["case"] and "0.900" in moved[0]["case"]
    assert moved[1]["target"] == 0.97 and moved[1]["ratio"] == round(705.0 / 725.0, 3)
    assert [r["target"] for r in moved[2:]] == [None] * 4
    still = cs.on_off_rows([_study(700.0, 1440.0), _study(710.0, 1450.0)], offs, "w, t", "d")
    # (700/1440)/(720/1450) and (710/1450)/(730/1460): their median, the target's row
    expected = ((700 / 1440) / (720 / 1450) + (710 / 1450) / (730 / 1460)) / 2
    assert still[0]["ratio"] == round(expected, 3) and still[0]["target"] == 0.97
    assert "VOID" not in still[0]["case"]
    assert [r["target"] for r in still[1:]] == [None] * 5
    none = cs.on_off_rows([_study(700.0, 0.0)], [_study(720.0, 0.0)], "w, t", "d")
    assert none[0]["target"] is None and none[1]["target"] == 0.97


_TWO_STUDIES = """
import json, resource, sys, tempfile
from dataclasses import replace
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import active_sampling as bench
import surrogate_cost as sc
setup = replace(bench.Setup(space="wide", steps=200, simulations=10), grid_size=6,
                time_steps=5, hidden=16, batch_size=8, watermark=8)
work = Path(tempfile.mkdtemp())
specs = [sc.spec(setup, 1, None, work / "on", "density"),
         sc.spec(setup, 1, sc.PREVIOUS, work / "off")]
def total():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
before = total()
runs = sc.run_specs(specs)
print(json.dumps([[run["children_cpu"] for run in runs], total() - before]))
"""


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_study_counts_its_own_solvers_cpu_only() -> None:
    """Two studies in one process (a pair's design): each study's ``children_cpu`` is
    its own simulations' CPU, so the two add up to what the OS counted for the process's
    children over both (`RUSAGE_CHILDREN`, the oracle). Before the fix the second study
    counted the first's solvers too (the quiet runs' "solvers 6.3" then "12.0")."""
    out = subprocess.run([sys.executable, "-c", _TWO_STUDIES, str(BENCHMARKS)],
                         capture_output=True, text=True, timeout=560, check=True)  # fmt: skip
    each, total = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(cpu > 0 for cpu in each)
    assert sum(each) == pytest.approx(total, abs=1e-6)
