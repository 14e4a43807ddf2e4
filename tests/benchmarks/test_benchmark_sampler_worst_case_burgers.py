"""benchmarks/sampler_worst_case_burgers.py (the guide's A/B recipe for a user's own
problem, docs/concepts/study.md "Your own A/B"): its arm specs, and ``--quick`` end to
end (two real studies of 8 simulations). No accuracy is asserted: the figures are for
people to read."""

from __future__ import annotations

import re
import sys

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


def test_an_integer_option_reaches_the_sampler_as_an_int() -> None:
    # "breed:min_observations=4" was parsed 4.0, which the sampler refuses ("must be a
    # positive int, not 4.0"): the guide's recipe could not set a count option
    name, options = benchmark_module("sampler_worst_case_burgers").parse_arm(
        "breed:min_observations=4,exploration=0.3,window=20"
    )
    assert (name, options) == ("breed", {"min_observations": 4, "exploration": 0.3, "window": 20})
    assert type(options["min_observations"]) is int and type(options["exploration"]) is float


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("arm", "match"),
    [
        ("foo", "unknown sampler 'foo'"),
        ("surrogate:exploration=1.5", r"exploration must be finite and in \[0.0, 1.0\]"),
        ("surrogate:exploraton=0.8", "did you mean 'exploration'"),
    ],
)
def test_a_bad_arm_is_refused_before_any_study_runs(
    arm: str, match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # it was refused by its own study's child, after the baseline's study had run (40 s
    # at --n_sims 8 on a quiet machine, minutes at the default size)
    module = benchmark_module("sampler_worst_case_burgers")
    studies: list[str] = []

    def child(spec: str, *_: object) -> dict[str, float]:
        studies.append(spec)  # (a study would run here: none may)
        return {"mean": 1.0, "p90": 1.0, "max": 1.0, "share_low_nu": 0.0}

    monkeypatch.setattr(module, "child", child)
    monkeypatch.setattr(sys, "argv", ["burgers", "--arms", "lhs", arm, "--seeds", "1"])
    with pytest.raises(SystemExit, match=f"arm {re.escape(repr(arm))}: .*{match}"):
        module.main()
    assert studies == []
