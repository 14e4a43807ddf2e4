"""The Navier–Stokes example's errors beside the MSE (`navier_stokes.errors`): the
relative L2 error, pooled and by lead time, for the model and both baselines, against
cases whose answer is known in closed form; and `main(loss_fn=...)`, a user's own loss,
end to end (tiny)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

# examples/ is on the tests' sys.path (pyproject): the example's modules by package name
from navier_stokes import errors, train
from process_tree import processes_with


def known_samples() -> tuple[list[dict[str, np.ndarray]], np.ndarray]:
    """Two simulations of three time steps on a 4 x 4 grid: simulation s's field at step
    k is (-1)^s (k + 1) f (f a fixed field), its initial field half its first field; the
    mean field is then 0 at every point (the two simulations cancel)."""
    f = np.arange(16, dtype=np.float64).reshape(4, 4) - 7.3
    samples = []
    for s in range(2):
        sign = (-1.0) ** s
        for k in range(3):
            samples.append(
                {
                    "vorticity": (sign * (k + 1) * f).astype(np.float32),
                    "initial": (sign * 0.5 * f).astype(np.float32),
                    "time_step": np.array(k, np.int64),
                    "simulation_id": np.array(-1 - s, np.int64),
                }
            )
    return samples, f


def test_relative_l2_is_the_norm_of_the_error_over_the_norm_of_the_truth() -> None:
    truth = np.stack([np.full((3, 3), 2.0), np.full((3, 3), -1.0)])
    prediction = np.stack([np.full((3, 3), 2.5), np.zeros((3, 3))])
    np.testing.assert_allclose(errors.relative_l2(prediction, truth), [0.25, 1.0])
    # one field for every sample (the mean field) broadcasts
    np.testing.assert_allclose(errors.relative_l2(np.zeros((3, 3)), truth), [1.0, 1.0])


def test_the_errors_of_known_predictions_pooled_and_by_lead_time() -> None:
    """A prediction 10% too large at every point has a relative L2 error of exactly 0.1
    at every time; the mean field (0 here) 1; persistence (half the first field) at step
    k: |(k + 1) - 0.5| / (k + 1). The MSEs by lead time are those of the same fields,
    and their mean is the pooled MSE (every time step has as many samples)."""
    samples, f = known_samples()
    truth = np.stack([s["vorticity"] for s in samples]).astype(np.float64)
    got = errors.field_errors(samples, 1.1 * truth, interval=0.5)
    assert got["val_rel_l2"] == pytest.approx(0.1)
    assert got["mean_field_rel_l2"] == pytest.approx(1.0)
    persistence = [((k + 1) - 0.5) / (k + 1) for k in range(3)]
    assert got["persistence_rel_l2"] == pytest.approx(np.mean(persistence), rel=1e-6)
    assert got["val_mse_of_predictions"] == pytest.approx(((0.1 * truth) ** 2).mean(), rel=1e-6)
    f2 = float((f**2).mean())
    assert [r["time_step"] for r in got["by_lead_time"]] == [0, 1, 2]
    for k, row in enumerate(got["by_lead_time"]):
        assert row["t"] == pytest.approx((k + 1) * 0.5) and row["samples"] == 2
        assert row["val_rel_l2"] == pytest.approx(0.1)
        assert row["mean_field_rel_l2"] == pytest.approx(1.0)
        assert row["persistence_rel_l2"] == pytest.approx(persistence[k], rel=1e-6)
        assert row["val_mse"] == pytest.approx(0.01 * (k + 1) ** 2 * f2, rel=1e-5)
        assert row["mean_field_mse"] == pytest.approx((k + 1) ** 2 * f2, rel=1e-5)
        assert row["persistence_mse"] == pytest.approx((k + 0.5) ** 2 * f2, rel=1e-5)
    mean_of_rows = np.mean([r["val_mse"] for r in got["by_lead_time"]])
    assert mean_of_rows == pytest.approx(got["val_mse_of_predictions"])
    # the baselines' pooled MSEs are train.baselines' (computed apart, by its own code)
    rows = got["by_lead_time"]
    for name in ("mean_field", "persistence"):
        pooled = train.baselines(samples)[f"{name}_mse"]
        assert np.mean([r[f"{name}_mse"] for r in rows]) == pytest.approx(pooled, rel=1e-6)
    with pytest.raises(ValueError, match=r"predictions of shape \(6, 1, 4, 4\) for 6"):
        errors.field_errors(samples, truth[:, None], interval=0.5)


def test_the_table_shows_a_few_lead_times_and_the_mse_tails_are_per_simulation() -> None:
    samples, _ = known_samples()
    truth = np.stack([s["vorticity"] for s in samples]).astype(np.float64)
    got = errors.field_errors(samples, 1.1 * truth, interval=0.5)
    lines = errors.lead_time_table(got, "fno", time_steps=3)
    assert lines[0].startswith("relative L2 error") and "0.1 vs mean field 1 " in lines[0]
    assert len(lines) == 2 + len(errors.shown_lead_times(3)) == 5
    assert errors.shown_lead_times(10) == [0, 3, 6, 9]
    # the MSE of each simulation: the second's fields are the first's negated, the same MSE
    prediction = truth.copy()
    prediction[3:] = 0.0  # simulation -2 predicted as zero: its MSE is its fields' mean square
    tails = errors.mse_tails(samples, prediction)
    assert tails["max"] == pytest.approx((truth[3:] ** 2).mean(), rel=1e-6)
    assert tails["p99"] == pytest.approx(0.99 * tails["max"], rel=1e-6)  # linear, over [0, max]


def test_the_table_header_says_when_it_shows_some_lead_times_only() -> None:
    """(Before: 4 of 6 lead times printed, nothing saying the others are in --json.)"""
    row = dict(t=1.0, val_rel_l2=0.5, mean_field_rel_l2=1.0, persistence_rel_l2=1.5, val_mse=0.1)
    got = dict(val_rel_l2=0.5, mean_field_rel_l2=1.0, persistence_rel_l2=1.5,
               by_lead_time=[{**row, "time_step": k} for k in range(6)])  # fmt: skip
    lines = errors.lead_time_table(got, "fno", time_steps=6)
    assert lines[1].startswith("by lead time") and lines[1].endswith(
        "MSE fno   (4 of 6 lead times; --json has all)"
    )
    assert len(lines) == 2 + 4
    all_shown = dict(got, by_lead_time=got["by_lead_time"][:4])
    assert errors.lead_time_table(all_shown, "fno", time_steps=4)[1].endswith("MSE fno")


SIMULATIONS, STEPS = 12, 5
TINY = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "32",
    "--dt", "0.05", "--width", "8", "--modes", "8", "--layers", "2", "--num_validation", "2",
    "--buffer_size", "60", "--watermark", "16", "--batch_size", "8",
    "--sample_to_insert_ratio", "8", "--eval_steps", "none", "--logging_steps", "100",
    "--job_limit", "2", "--disable_progress_bar", "--no_plot",
]  # fmt: skip


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_your_own_loss_trains_the_example_and_the_mse_stays_the_mse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`main(loss_fn=...)` (the how-to's way to bring a loss): the trainer's steps call
    it, its validation value is the summary's ``val_loss``, and ``val_mse`` is still the
    MSE of the final model's predictions (the errors by lead time, recomputed here from
    the same model's fields), so that the baselines compare with it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    calls: list[tuple[torch.Size, str]] = []

    def relative_l2_loss(
        outputs: torch.Tensor, targets: torch.Tensor, reduction: str = "mean"
    ) -> torch.Tensor:
        calls.append((outputs.shape, reduction))
        dims = tuple(range(1, outputs.ndim))
        losses = torch.linalg.vector_norm(outputs - targets, dim=dims) / torch.linalg.vector_norm(
            targets, dim=dims
        )
        return losses if reduction == "none" else losses.mean()

    out = tmp_path / "own_loss"
    summary = train.main([*TINY, "--output_dir", str(out)], loss_fn=relative_l2_loss)
    assert summary["steps"] > 0
    assert sum(1 for _, reduction in calls if reduction == "mean") >= summary["steps"]
    # the trainer validated on the user's loss: the pooled relative L2 of its samples
    assert summary["val_loss"] == pytest.approx(summary["val_rel_l2"], rel=1e-3)
    rows = summary["by_lead_time"]
    assert len(rows) == STEPS
    assert summary["val_mse"] == pytest.approx(np.mean([r["val_mse"] for r in rows]), rel=1e-6)
    assert summary["val_mse"] == summary["val_mse_of_predictions"]
    assert summary["val_mse_max"] >= summary["val_mse_p99"] > 0
    printed = capsys.readouterr().out
    assert "trained on loss_fn relative_l2_loss: its validation value" in printed
    assert "by lead time" in printed
    assert processes_with(str(out / "rendezvous")) == []


def test_the_compile_flags_help_says_what_compiling_costs_a_small_cpu_study() -> None:
    """``--help`` on ``--torch_compile`` (a user trial: a compiled small CPU study
    trained 17 steps instead of 73 with no warning): the cost, how to see it (the
    end-of-run reuse figure) and what to do; the library's own words and default kept.
    No step count: it follows the machine's load (a later trial saw 3 where the help
    said 17; failed before: the entry quoted "17 instead of 73")."""
    said = " ".join(train.parser([]).format_help().split())
    start = said.index("--torch_compile [{true,false}] Compile")  # the entry, not the usage
    entry = said[start : said.index("--torch_compile_backend", start + 1)]
    assert entry.startswith(
        "--torch_compile [{true,false}] Compile the training step's model with torch.compile."
    )
    wanted = ["can outlast the study", "'each sample trained on N times'",
              "--num_simulations", "leave compilation to a GPU", "(default: False)",
              "following the machine's speed and load",
              "docs/how-to/neural-operator.md"]  # fmt: skip
    for words in wanted:
        assert words in entry, entry
    assert "instead of" not in entry and "17" not in entry, entry
