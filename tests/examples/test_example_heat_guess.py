"""The heat_guess example (issue 47): an implicit heat solver that asks the trainer's
surrogate for the initial guess of each step's iterative solve.

In process (numpy, torch): the solver against a dense backward-Euler solve (the
oracle), its work with no guess, an exact guess and a bad one; the Dirichlet padding of
`OddConv` against the odd extension written out. End to end (e2e: the trainer and
solver processes): the study with and without the surrogate, its records checked
against the same simulations solved here."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from process_tree import run_group

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
from heat_guess import train as heat_guess_train  # noqa: E402
from heat_guess.report_words import serving_sentence, work_words  # noqa: E402
from heat_guess.solver import GuessConfig, Operator, Work, boundary, steps  # noqa: E402
from heat_guess.train import OddConv, baseline_work  # noqa: E402

EXAMPLE = Path(__file__).parents[2] / "examples" / "heat_guess" / "train.py"
PARAMS = {"t_initial": 300.0, "t_left": 100.0, "t_right": 500.0, "t_bottom": 200.0,
          "t_top": 450.0}  # fmt: skip


def dense_steps(parameters: dict[str, float], config: GuessConfig) -> list[np.ndarray]:
    """Backward Euler by a dense solve (independent of the iterative code)."""
    n, r = config.grid_size, config.r
    lap1 = np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    eye = np.eye(n)
    lap = np.kron(eye, lap1) + np.kron(lap1, eye)  # (row-major (y, x) flattening)
    a = np.eye(n * n) - r * lap
    b = r * boundary(parameters, n).ravel()
    u, out = np.full(n * n, parameters["t_initial"]), []
    for _ in range(config.time_steps):
        u = np.linalg.solve(a, u + b)
        out.append(u.reshape(n, n))
    return out


@pytest.mark.parametrize("method", ["jacobi", "cg"])
def test_the_iterative_steps_reach_the_dense_solution(method: str) -> None:
    config = GuessConfig(grid_size=8, time_steps=5, dt=2e-3, tol=1e-10, method=method)
    u = np.full((8, 8), PARAMS["t_initial"])
    for (residual, increment), expected in zip(
        steps(PARAMS, config), dense_steps(PARAMS, config), strict=True
    ):
        assert np.abs(residual).max() > 0
        u = u + increment
        np.testing.assert_allclose(u, expected, rtol=0, atol=1e-6)


def test_an_exact_guess_costs_two_products_a_bad_one_one_more_than_none() -> None:
    config = GuessConfig(grid_size=8, time_steps=6, dt=2e-3, tol=1e-6)
    exact = dense_steps(PARAMS, config)
    base = baseline_work(PARAMS, config)
    assert all(p > 3 for p in base)  # (the previous state is not already converged)

    state = {"t": 0, "u": np.full((8, 8), PARAMS["t_initial"])}

    def perfect(residual: np.ndarray) -> tuple[np.ndarray, int]:
        increment = exact[state["t"]] - state["u"]
        state["u"], state["t"] = exact[state["t"]], state["t"] + 1
        return increment, 7

    work = Work()
    list(steps(PARAMS, config, perfect, work))
    # the initial residual and the guess's check; no iteration
    assert work.products == [2] * config.time_steps
    assert work.used == [True] * config.time_steps and work.versions == [7] * 6

    rng = np.random.default_rng(0)
    bad, none = Work(), Work()
    list(steps(PARAMS, config, lambda r: (rng.normal(0, 1e4, r.shape), 3), bad))
    list(steps(PARAMS, config, lambda r: None, none))
    assert bad.used == [False] * 6 and bad.products == [p + 1 for p in base]
    assert none.products == base and none.versions == [-1] * 6


def test_with_no_check_every_guess_is_taken_and_the_iterations_are_recorded() -> None:
    """``--guess_check none`` (benchmarks/serve_guess.py's arm B): a guess that came is
    taken however bad (the residual check refuses it), at the same products: its
    residual is computed either way, as the solve starts from it. The records' iterations
    are the products less the initial residual and the guess's."""
    config = GuessConfig(grid_size=8, time_steps=6, dt=2e-3, tol=1e-6)
    unchecked = GuessConfig(grid_size=8, time_steps=6, dt=2e-3, tol=1e-6, guess_check="none")
    assert unchecked.argv()[-2:] == ["--guess_check", "none"]
    base = Work()
    list(steps(PARAMS, config, None, base))
    assert base.iterations == [p - 1 for p in base.products]

    def bad(residual: np.ndarray) -> tuple[np.ndarray, int]:
        return np.random.default_rng(0).normal(0, 1e4, residual.shape), 3

    checked, taken = Work(), Work()
    list(steps(PARAMS, config, bad, checked))
    list(steps(PARAMS, unchecked, bad, taken))
    assert checked.used == [False] * 6 and checked.iterations == base.iterations
    assert taken.used == [True] * 6
    assert all(t > b for t, b in zip(taken.iterations, base.iterations, strict=True))
    assert taken.iterations == [p - 2 for p in taken.products]
    with pytest.raises(ValueError, match="guess_check='always'"):
        GuessConfig(guess_check="always")


def test_odd_conv_pads_with_the_odd_extension_about_the_ghost_points() -> None:
    x = torch.arange(1.0, 1.0 + 36).reshape(1, 1, 6, 6)
    conv = OddConv(5)
    with torch.no_grad():
        conv.conv.weight.zero_()
        conv.conv.weight[0, 0, 2, 0] = 1.0  # output (i, j) reads input (i, j - 2)
    with torch.no_grad():
        out = conv(x)[0, 0]
    # odd extension: x[:, -1] = 0 (the ghost), x[:, -2] = -x[:, 0]
    np.testing.assert_array_equal(out[:, 0].numpy(), -x[0, 0, :, 0].numpy())
    np.testing.assert_array_equal(out[:, 1].numpy(), np.zeros(6))
    np.testing.assert_array_equal(out[:, 2:].numpy(), x[0, 0, :, :4].numpy())
    with pytest.raises(ValueError, match="odd"):
        OddConv(4)


def test_odd_conv_keeps_the_modules_dtype_methods() -> None:
    # (an int attribute named `half` once shadowed `torch.nn.Module.half`: a surrogate
    # cast to float16 for serving raised "'int' object is not callable")
    conv = OddConv(5).half()
    assert conv.conv.weight.dtype == torch.float16
    assert conv.float().conv.weight.dtype == torch.float32


def test_a_bad_configuration_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="method='gmres'"):
        GuessConfig(method="gmres")
    with pytest.raises(ValueError, match="tol=2"):
        GuessConfig(tol=2)
    assert Operator(1.0).products == 0


def test_the_serving_line_is_a_sentence_of_the_counters() -> None:
    """The report's "serving:" line (a user trial: it printed the telemetry as a Python
    dict): the counters in words, the zero ones left out, the reasons a request went
    unanswered named; --json keeps the dict."""
    telemetry = {"requests": 300, "answered": 290, "batches": 260, "serving_share": 0.05004,
                 "latency_steps_p50": 0.0, "latency_steps_p99": 8.0, "latency_ms_p50": 42.04,
                 "latency_ms_p99": 165.1, "refused_not_serving": 7, "refused_busy": 0,
                 "rejected_shape": 2, "expired": 1}  # fmt: skip
    assert serving_sentence(telemetry) == (
        "290 of 300 requests answered, in 260 batches taking 5.0% of training time; "
        "latency median 0 steps (42 ms), 99th percentile 8 steps (165 ms); not answered: "
        "7 refused (not_serving 7), 2 rejected (shape 2), 1 expired before an answer"
    )
    assert serving_sentence({}) == "no requests (the simulations never asked)"
    del telemetry["latency_steps_p50"], telemetry["expired"], telemetry["rejected_shape"]
    assert "latency" not in serving_sentence(telemetry)
    one = {"requests": 1, "answered": 1, "batches": 1, "serving_share": 0.01,
           "latency_steps_p50": 1.0, "latency_steps_p99": 1.0, "latency_ms_p50": 1.0,
           "latency_ms_p99": 1.0}  # fmt: skip
    assert "median 1 step (1 ms), 99th percentile 1 step (1 ms)" in serving_sentence(one)
    assert serving_sentence(telemetry).endswith("not answered: 7 refused (not_serving 7)")


def test_the_first_simulations_are_said_to_get_the_untrained_models_answers() -> None:
    """The example's help and the serving how-to said the first simulations "get nothing
    (refused or no answer)"; a user trial's records (htrial7: ``--output_dir``, then
    ``records/sim0.json``) showed simulation 0 answered at every step, its first 18
    answers of version 0 (the untrained model, none used under the check), and the
    report's "first model version" column reads 0 for it. Both texts now say so."""
    page = Path(__file__).parents[2] / "docs" / "how-to" / "serve-while-training.md"
    for text in (heat_guess_train.__doc__ or "", page.read_text(encoding="utf-8")):
        said = " ".join(text.split())
        assert "get nothing" not in said
        assert "answered by the untrained model (version 0" in said


def test_the_work_line_says_more_work_when_the_surrogate_cost_some() -> None:
    """The report's "second half" line (a user trial of --method cg, htrial7: 8.3 vs 7.7
    products per step printed "0.92x less work", which is more work): the ratio is of
    the larger to the smaller, and the words say which way."""
    assert work_words(13.3, 38.8) == "2.92x less work"
    assert work_words(8.3, 7.7) == "1.08x more work"
    assert work_words(7.7, 7.7) == "the same work"
    assert work_words(7.71, 7.7) == "the same work"  # within the printed rounding


def test_the_work_line_says_no_ratio_when_a_figure_is_not_a_number() -> None:
    """A NaN figure (the mean of no products) printed "nanx more work": no ratio is
    said, and the figures as they are."""
    nan, said = float("nan"), "no ratio: a figure is not a positive number"
    assert work_words(nan, 7.7) == work_words(7.7, nan) == work_words(nan, nan) == said
    assert work_words(0.0, 7.7) == said  # (was a ZeroDivisionError)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("check", ["residual", "none", "never asks"])
def test_the_study_serves_guesses_and_records_the_work(tmp_path: Path, check: str) -> None:
    """With its guesses checked (the default), taken unchecked (``--guess_check none``:
    every answered guess is used) or never asking (``--no_surrogate``)."""
    steps_, sims = 12, 3
    surrogate = check != "never asks"
    cmd = [sys.executable, str(EXAMPLE), "--num_simulations", str(sims), "--time_steps",
           str(steps_), "--grid_size", "16", "--output_dir", str(tmp_path), "--json"]  # fmt: skip
    if not surrogate:
        cmd.append("--no_surrogate")
    else:
        cmd += ["--guess_check", check]
    proc = run_group(cmd, timeout=220)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    config = GuessConfig(grid_size=16, time_steps=steps_)
    records = sorted(tmp_path.glob("records/sim*.json"))
    assert len(records) == sims and len(summary["simulations"]) == sims
    answered = 0
    for path in records:
        record = json.loads(path.read_text())
        base = baseline_work(record["parameters"], config)
        asked = [v >= 0 for v in record["versions"]]
        answered += sum(asked)
        # without a prediction a step costs what it costs solved alone (computed here);
        # a prediction that is not used costs one product more (its check)
        for products, used, got, alone in zip(
            record["products"], record["used"], asked, base, strict=True
        ):
            if not used:
                assert products == alone + got
            assert used == got if check == "none" else not used or got
        spent = zip(record["products"], asked, strict=True)
        assert record["iterations"] == [p - 1 - g for p, g in spent]
        versions = [v for v in record["versions"] if v >= 0]
        assert versions == sorted(versions)  # a simulation never sees an older model
        assert all(v <= summary["global_step"] for v in versions)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("serving"))
    assert line == f"serving: {serving_sentence(summary['serving'])}"  # a sentence, not a dict
    assert summary["guess_check"] == ("residual" if check == "never asks" else check)
    if surrogate:
        assert answered > 0 and summary["serving"]["answered"] == answered
    else:
        assert answered == 0 and summary["work_saved"] == pytest.approx(1.0)
        assert summary["serving"].get("requests", 0) == 0


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_example_on_two_ranks_as_the_docs_launch_it(tmp_path: Path) -> None:
    """``accelerate launch --multi_gpu --num_processes 2 examples/heat_guess/train.py``
    with no --output_dir (found by a user: each rank made its own temporary directory,
    so the simulations never found rank 1's endpoint and the study failed after a
    minute). The ranks share ``outputs/heat_guess``, each serves its simulations, and
    rank 0 alone reports."""
    sims = 2
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", "0", str(EXAMPLE),
           "--num_simulations", str(sims), "--time_steps", "8", "--grid_size", "8",
           "--json"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    proc = run_group(cmd, timeout=280, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summaries = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 1  # rank 0's report, once
    summary = json.loads(summaries[0])
    records = sorted((tmp_path / "outputs" / "heat_guess" / "records").glob("sim*.json"))
    assert len(records) == sims and len(summary["simulations"]) == sims
    # both ranks served, each its simulations (id % 2): every simulation was answered
    for path in records:
        assert any(v >= 0 for v in json.loads(path.read_text())["versions"]), path.name
