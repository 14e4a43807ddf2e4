"""benchmarks/active_sampling.py in quick mode: the five arms (LHS, optimised LHS,
scrambled Sobol', Breed's exploration alone, Breed) run their whole budget in turn
(every simulation finished, the same steps), the Breed arms are fed losses, the control
draws no bred point, the rows and the plot come out well formed, a second invocation
reuses every recorded run instead of running it again, and --report runs nothing. No
error is asserted: the figures are for people to read. The paired statistics are
checked on their own, against figures worked out by hand. The first invocation is the
command itself, in a subprocess; the later ones and the refusals call its `main` in
this process (what they check is the command line's handling, not a process start:
each subprocess paid seconds of imports of torch, scipy and matplotlib)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from active_sampling_bench import (
    ARMS,
    BASELINES,
    BENCHMARKS,
    SCRIPT,
    bench_module,
    run_main,
    tail_row,
)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)  # three invocations; minutes on a loaded machine
def test_the_five_arms_run_their_budget_and_a_second_run_reuses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "where.png"
    argv = ["--quick", "--json", "--plot", str(png), "--output_dir", str(tmp_path)]
    command = [sys.executable, str(SCRIPT), *argv]
    out = subprocess.run(command, capture_output=True, text=True, timeout=280, check=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    cases = [r["case"] for r in rows]
    for test in ("uniform", "hard"):
        for label in BASELINES:
            name = f"walls, {test} MSE: {label} / Breed"
            assert f"{name}, medians" in cases
            assert f"{name}, per seed (median, 95% interval)" in cases
    # the means' rows end with the share, then the worst cases' (`WORST`, 4 statistics)
    assert cases[2 * 4 * 2] == "walls, share of simulations in the hard region: Breed / LHS"
    assert len(rows) == 2 * 4 * 2 + 1 + 4 * 4 * 2
    assert "walls, hard max per-simulation MSE: exploration alone / Breed, medians" in cases
    by_case = {r["case"]: r for r in rows}
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0 and math.isfinite(row["ratio"])
        if row["case"].endswith("medians"):  # baseline / Breed: higher is better for Breed
            assert row["ratio"] == pytest.approx(row["baseline"] / row["ours"], rel=1e-3)
        elif row["unit"] == "ratio":  # one seed: the interval is the ratio itself
            assert row["ours"] == pytest.approx(row["ratio"], abs=1e-3)  # ratio: 3 decimals
            assert row["baseline"] == pytest.approx(row["ratio"], abs=1e-3)
    uniform = by_case["walls, uniform MSE: LHS / Breed, medians"]
    assert uniform["target"] == 1.2
    assert by_case["walls, hard MSE: LHS / Breed, medians"]["target"] == uniform["ratio"]
    assert (
        by_case["walls, uniform MSE: LHS / Breed, per seed (median, 95% interval)"]["target"] == 1.0
    )

    results = json.loads((tmp_path / "results.json").read_text())
    setup, runs = results["setup"], results["runs"]
    assert [r["sampler"] for r in runs] == ARMS  # in turn, one seed
    assert {r["seed"] for r in runs} == {1000} and {r["phase"] for r in runs} == {"evaluation"}
    for run in runs:
        assert run["simulations"] == setup["simulations"] == len(run["parameters"])
        assert run["steps"] == setup["steps"]
        hard_share = sum(p["log2_alpha"] >= 0 for p in run["parameters"]) / len(run["parameters"])
        assert run["hard_share"] == pytest.approx(hard_share, abs=1e-4)
        for p in run["parameters"]:  # the walls space: the other temperatures fixed
            assert p["t_initial"] == p["t_bottom"] == p["t_top"] == 300.0
    explore, breed = runs[3], runs[4]
    for run in (explore, breed):  # the trainer fed the sampler
        assert run["reductions"] > 0 and run["observed"] > 0
    assert explore["explored"] == explore["simulations"]  # no bred draw
    assert png.stat().st_size > 10_000

    # every run is in the JSON-lines file; a second invocation reuses them all
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert [json.loads(line)["sampler"] for line in lines] == ARMS
    png.unlink()
    code, again, _ = run_main(argv, monkeypatch, capsys)
    assert code == 0 and "5 run(s) recorded" in again
    assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines  # nothing re-run
    assert json.loads(again.strip().splitlines()[-1])["rows"] == rows
    assert png.stat().st_size > 10_000  # the plot again, from the recorded runs
    # --report runs nothing: seed 1001, never run, is left out; a second file is read too
    report = ["--quick", "--json", "--report", "--seeds", "2", "--output_dir", str(tmp_path),
              "--results", str(tmp_path / "other.jsonl"), str(tmp_path / "runs.jsonl")]  # fmt: skip
    code, out, _ = run_main(report, monkeypatch, capsys)
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["rows"] == rows
    assert not (tmp_path / "other.jsonl").exists()
    assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines
    # --arms: only those run; the fixed designs' runs are kept whatever Breed's options
    other = ["--quick", "--json", "--arms", "lhs", "breed", "--output_dir", str(tmp_path),
             "--breed", json.dumps({"exploration": 1.0, "explorer": "lhs"})]  # fmt: skip
    code, out, _ = run_main(other, monkeypatch, capsys)
    added = (tmp_path / "runs.jsonl").read_text().splitlines()[len(lines) :]
    assert code == 0 and [json.loads(line)["sampler"] for line in added] == ["breed"]
    cases = [r["case"] for r in json.loads(out.strip().splitlines()[-1])["rows"]]
    assert len(cases) == 2 * 2 + 1 + 4 * 2 and cases[4].startswith("walls, share of")
    assert all("LHS / Breed" in case for case in cases[:4] + cases[5:])
    code, out, _ = run_main(["--quick", "--arms", "sobol", "--output_dir", str(tmp_path)],
                         monkeypatch, capsys)  # fmt: skip
    assert code == 0 and "scrambled Sobol'" in out  # its run, reused; nothing to pair with
    assert (tmp_path / "runs.jsonl").read_text().splitlines() == lines + added


@pytest.mark.timeout(120)
def test_mixed_seeds_and_a_report_of_nothing_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--quick", "--first_seed", "998", "--seeds", "3", "--output_dir", str(tmp_path)]
    code, _, err = run_main(argv, monkeypatch, capsys)
    assert code == 2 and "mix tuning and evaluation seeds" in err
    assert not (tmp_path / "runs.jsonl").exists()
    code, _, err = run_main(
        ["--quick", "--report", "--output_dir", str(tmp_path)], monkeypatch, capsys
    )
    assert code == 2 and "no seed on which every arm ran" in err
    assert not (tmp_path / "runs.jsonl").exists()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["--arms", "lhs", "surrogate", "--surrogate", '{"exploraton": 0.8}'],
         "--surrogate: .*did you mean 'exploration'"),
        (["--arms", "lhs", "density", "--density", '{"share": 1.5}'],
         r"--density: share must be finite and in \[0.0, 1.0\]"),
        (["--arms", "lhs", "breed", "--breed", '{"decay_draws": 40}'],
         "--breed: decay_draws=40 without exploration_final"),
        (["--arms", "lhs", "breed", "--breed", "{exploration: 0.7}"], "--breed: not JSON"),
    ],
)  # fmt: skip
def test_a_bad_option_of_an_arm_is_refused_before_any_study_runs(
    flags: list[str],
    match: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # it was refused by the arm's own study, in its child, after the arms before it had
    # run (plain LHS first: seconds to minutes), with the child's traceback
    bench = bench_module()

    def child(*args: object) -> None:
        raise AssertionError(f"a study ran: {args[1:3]}")

    monkeypatch.setattr(bench, "child", child)
    argv = [*flags, "--seeds", "1", "--test", "2", "--test_hard", "1"]
    code, _, err = run_main([*argv, "--output_dir", str(tmp_path)], monkeypatch, capsys)
    assert code == 2, err
    assert re.search(match, err), err


@pytest.mark.timeout(120)
def test_the_arms_alternate_their_order_from_seed_to_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # interleaved A B, B A, ...: a drift of the load over a round favours no arm (it ran
    # A B, A B: the baseline always first)
    bench, ran = bench_module(), []

    def child(setup: object, kind: str, seed: int, *_: object) -> dict[str, object]:
        ran.append((kind, seed))
        return {**tail_row(seed, kind, 1.0, 2.0, 3.0), "hard_p90": 1.0, "hard_max": 2.0,
                "steps": 10, "wall": 1.0}  # fmt: skip

    monkeypatch.setattr(bench, "child", child)
    argv = ["--ours", "surrogate", "--arms", "lhs", "surrogate", "--seeds", "3", "--test", "2",
            "--test_hard", "1", "--output_dir", str(tmp_path)]  # fmt: skip
    code, out, err = run_main(argv, monkeypatch, capsys)
    assert code == 0, err
    assert ran == [("lhs", 1000), ("surrogate", 1000), ("surrogate", 1001), ("lhs", 1001),
                   ("lhs", 1002), ("surrogate", 1002)]  # fmt: skip


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_surrogate_arm_in_the_12_parameter_space(tmp_path: Path) -> None:
    argv = ["--quick", "--json", "--ours", "surrogate", "--space", "wide", "--simulations", "12",
            "--steps", "400", "--output_dir", str(tmp_path)]  # fmt: skip
    command = [sys.executable, str(SCRIPT), *argv]
    out = subprocess.run(command, capture_output=True, text=True, timeout=500, check=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    # mean, p99, max, hard mean, hard p90, hard max x 3 fixed designs
    assert len(rows) == 6 * 3 * 2 + 1
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["sampler"] for r in runs] == ["lhs", "lhs_opt", "sobol", "surrogate"]
    names = set(bench_module().WIDE_NAMES)
    for run in runs:
        assert run["uniform_mse"] <= run["uniform_p99"] <= run["uniform_max"]
        assert len(names) == 12 and all(set(p) == names for p in run["parameters"])
        varying = [len({p[k] for p in run["parameters"]}) > 1 for k in sorted(names)]
        assert all(varying)  # every one of the 12 varies
    surrogate = runs[-1]
    assert surrogate["observed"] > 0 and surrogate["reductions"] > 0
    assert surrogate["explored"] < surrogate["simulations"]  # some draws were acquired
    assert surrogate["sampler_seconds"] > 0


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_density_arm_in_the_12_parameter_space(tmp_path: Path) -> None:
    """--ours density: the high-loss density arm runs its budget, is fed losses, and
    its tail rows name it; the fixed designs' rows as for the surrogate."""
    argv = ["--quick", "--json", "--ours", "density", "--space", "wide", "--simulations", "12",
            "--steps", "400", "--arms", "lhs_opt", "density",
            "--output_dir", str(tmp_path)]  # fmt: skip
    command = [sys.executable, str(SCRIPT), *argv]
    out = subprocess.run(command, capture_output=True, text=True, timeout=500, check=True).stdout
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert len(rows) == 6 * 2  # mean, p99, max, hard mean, hard p90, hard max x opt. LHS
    assert all(r["case"].split(": ")[1].startswith("LHS, optimised / high-loss density")
               for r in rows)  # fmt: skip
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert [r["sampler"] for r in runs] == ["lhs_opt", "density"]
    density = runs[-1]
    assert density["simulations"] == 12 and density["observed"] > 0
    assert density["reductions"] > 0 and density["sampler_seconds"] > 0


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_surrogate_s_cost_benchmark_runs_a_pair(tmp_path: Path) -> None:
    """benchmarks/surrogate_cost.py --quick: one on / off pair (the off study replays
    the on study's draws), its rows well formed: first the target's (the median of the
    pairs' ratios of the reference-normalised rate), then the eighth round's four, then
    the reference's own rate on / off; no rate is asserted."""
    command = [sys.executable, str(BENCHMARKS / "surrogate_cost.py"), "--quick", "--json"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=560, check=True,
                         cwd=tmp_path).stdout  # fmt: skip
    assert "pair 0 (on, off): span on " in out
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    # the target on the first row, or (the reference moved beyond its tolerance: void)
    # on the second: exactly one row carries it
    void = "VOID" in rows[0]["case"]
    assert [r["target"] for r in rows] == (
        [None, 0.97, None, None, None, None] if void else [0.97, None, None, None, None, None]
    )
    assert [r["unit"] for r in rows] == ["ratio", "steps/cpu-s", "steps/cpu-s", "steps/s",
                                         "ratio", "steps/cpu-s"]  # fmt: skip
    assert "reference steps" in rows[5]["case"]
    assert "the target's row" in rows[0]["case"] and "reference" in rows[0]["case"]
    assert rows[0]["ratio"] == (None if void else rows[0]["ours"]) and rows[0]["baseline"] == 1.0
    assert "per pair" in rows[4]["case"] and rows[4]["ratio"] == rows[4]["ours"]
    assert "the step and the sampler" in rows[1]["case"] and "process" in rows[2]["case"]
    for row in rows:
        assert set(row) == {"case", "ours", "baseline", "unit", "ratio", "target"}
        assert row["ours"] > 0 and row["baseline"] > 0
    assert rows[1]["ratio"] == pytest.approx(rows[1]["ours"] / rows[1]["baseline"], rel=1e-2)


def test_an_on_arm_run_second_runs_the_replayed_draws_while_its_sampler_works() -> None:
    """surrogate_cost.py's odd pairs run off first: their on arm's sampler draws as ever
    (its work is the cost measured) while its study launches the replayed parameters."""
    bench = bench_module()
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import surrogate_cost
    finally:
        sys.path.remove(str(BENCHMARKS))
    setup = bench.Setup(space="wide")
    free = bench.make_arm(setup, "density", 3)
    replayed = [free.draw() for _ in range(3)]
    sampler = bench.make_arm(setup, "density", 4)
    own = bench.make_arm(setup, "density", 4)
    surrogate_cost.force_draws(sampler, replayed)
    assert [sampler.draw() for _ in range(3)] == replayed != [own.draw() for _ in range(3)]
    assert sampler.position == own.position == 3  # it drew each time
