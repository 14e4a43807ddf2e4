"""benchmarks/sampler_worst_case_burgers.py (the guide's A/B recipe for a user's own
problem, docs/concepts/study.md "Your own A/B"): its arm specs, and ``--quick`` end to
end (two real studies of 8 simulations). No accuracy is asserted: the figures are for
people to read."""

from __future__ import annotations

import pytest
from benchmark_json import ROW_KEYS, benchmark_module, json_rows


def test_an_arm_spec_names_a_sampler_and_its_numeric_options() -> None:
    parse = benchmark_module("sampler_worst_case_burgers").parse_arm
    assert parse("lhs") == ("lhs", {})
    assert parse("surrogate:exploration=0.8,kappa=0") == (
        "surrogate",
        {"exploration": 0.8, "kappa": 0.0},
    )
    with pytest.raises(SystemExit, match="key=number, got 'exploration'"):
        parse("surrogate:exploration")
    with pytest.raises(SystemExit, match="key=number, got 'kappa=high'"):
        parse("surrogate:kappa=high")


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_quick_runs_both_arms_and_reports_lhs_over_the_arm() -> None:
    rows = json_rows("sampler_worst_case_burgers.py", "--quick", timeout=280)
    assert [r["case"] for r in rows] == [
        f"burgers3 surrogate {stat} (lhs/arm)" for stat in ("mean", "p90", "max")
    ]
    for row in rows:
        assert set(row) >= ROW_KEYS
        assert row["unit"] == "rel L2" and row["target"] == 1.0
        # one seed: the median of the per-seed ratios is that seed's lhs / arm
        assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"])
