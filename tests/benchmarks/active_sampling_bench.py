"""What the tests of benchmarks/active_sampling.py share (test_benchmark_active_sampling*.py):
its paths, its modules imported by name (benchmarks/ is not a package: they import each
other by name), its `main` run in this process (`run_main`), and the rows of a run its
statistics read (`run_row`, `tail_row`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "active_sampling.py"
RESULTS = BENCHMARKS / "results"
ARMS = ["lhs", "lhs_opt", "sobol", "explore", "breed"]
BASELINES = ["LHS", "LHS, optimised", "scrambled Sobol'", "exploration alone"]


def stats_module():  # benchmarks/ is not a package: its modules import each other by name
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import active_sampling_stats
    finally:
        sys.path.remove(str(BENCHMARKS))
    return active_sampling_stats


def keys_module():  # which recorded run is reused (`active_sampling_keys`)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import active_sampling_keys
    finally:
        sys.path.remove(str(BENCHMARKS))
    return active_sampling_keys


def bench_module():  # the command's module, imported once (it puts benchmarks/ on sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import active_sampling
    finally:
        sys.path.remove(str(BENCHMARKS))
    return active_sampling


def run_main(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``active_sampling.py ARGV`` run in this process: its exit code (0 when `main`
    returns), stdout and stderr."""
    bench = bench_module()
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *argv])
    capsys.readouterr()  # what came before is not this command's
    try:
        bench.main()
        code = 0
    except SystemExit as exit_:  # argparse's error: exit 2, the message on stderr
        code = exit_.code if isinstance(exit_.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def run_row(seed: int, arm: str, uniform: float, hard: float) -> dict[str, object]:
    return {"sampler": arm, "seed": seed, "uniform_mse": uniform, "hard_mse": hard,
            "hard_share": 0.25}  # fmt: skip


def tail_row(seed: int, arm: str, mean: float, p99: float, top: float) -> dict[str, object]:
    return {**run_row(seed, arm, mean, 1.0), "uniform_p99": p99, "uniform_max": top}
