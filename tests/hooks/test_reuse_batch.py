"""A batch large against the stream (a user's trial: `--batch_size 1024` on a study of 640
samples trained 1 step and was told to "lower --watermark", at a watermark of 1; 512
trained on each sample 3.3 times, unwarned, under a ratio of 16). The end-of-run warning
names the batch size and its fix; and the reuse the docs promise
(docs/concepts/buffers.md, "How much reuse a ratio gives") holds on small runs. The
oracle is the step count: steps x batch_size / samples streamed, nothing the trainer
reports about itself."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainerState, TrainingArguments
from melissa_trainer.hooks.reuse import reuse_report

pytestmark = pytest.mark.timeout(120)
RATIO = 16  # the default sample-to-insert ratio of a reservoir


def run(tmp_path: Path, n: int, **overrides: Any) -> TrainerState:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=False, **overrides,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(n)), process_sample=xy,
    )  # fmt: skip
    return trainer.train()


def reuse_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "used each sample" in r.getMessage()
    ]


def test_a_batch_larger_than_the_stream_is_named_not_the_watermark(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """80 samples, batches of 100: no read is served until the stream ends (a read
    waits for a whole batch), so the run is the end-of-stream drain: one step, each
    sample once. The warning names --batch_size against the samples streamed, and not
    the watermark (1, already the lowest)."""
    n, batch = 80, 100
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        state = run(tmp_path, n, batch_size=batch)
    assert state.global_step == 1 and state.total_samples_seen == n  # the oracle
    (warning,) = reuse_warnings(caplog)
    assert f"--batch_size {batch}" in warning
    assert f"more than the {n} the stream brought each rank" in warning
    assert "Lower --batch_size" in warning
    assert "lower --watermark" not in warning


def test_a_batch_that_starves_the_ratio_is_warned_about_naming_the_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """80 samples, batches of 56 under the default ratio of 16: the rate limiter must let
    56 samples in before the first draw, so its draws trail 16 x the inserts by up to
    16 x 55, and an in-process stream ends there: about 16 x (80 - 56) / 80 = 4.8 draws
    per sample, not 16 (unwarned before: above the 1.5 of "trained once")."""
    n, batch = 80, 56
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        state = run(tmp_path, n, batch_size=batch)
    reuse = state.global_step * batch / n  # steps x batch / samples (the last may be short)
    assert 1.5 < reuse < RATIO / 2
    (warning,) = reuse_warnings(caplog)
    assert f"--batch_size {batch}" in warning
    assert "Lower --batch_size" in warning
    assert "lower --watermark" not in warning


@pytest.mark.parametrize("batch", [8, 40])
def test_the_docs_reuse_formula_holds_in_process(tmp_path: Path, batch: int) -> None:
    """The docs: with the defaults (ratio 16, watermark 1), each sample is drawn about
    16 x (1 - batch_size / N) times in process (N samples per rank; up to 16 x (1 +
    batch_size / N) streamed), so about 16 x (N - batch_size) / batch_size steps, within
    10% of 16 when N >= 10 batches (here N = 20 batches at 8). The oracle counts steps x
    batch / samples; a step's batch may be short only at the very end (the drain)."""
    n = 160
    state = run(tmp_path, n, batch_size=batch)
    low, high = RATIO * (n - batch) - batch, RATIO * (n + batch) + n  # draws, in samples
    assert low <= state.global_step * batch <= high + batch
    if n >= 10 * batch:
        assert state.global_step * batch / n >= 0.9 * RATIO


def test_the_warning_without_a_run_names_the_batch_for_each_rank() -> None:
    """Two ranks, 300 samples in all (150 each), batches of 200 per rank: the cause is
    the batch against each rank's share, stated per rank."""
    state = TrainerState(global_step=2, total_samples_seen=300, stream_ended=True)
    state.append_log({"buffer_put": 300.0, "buffer_got": 300.0})
    report = reuse_report(state, 1, 2, ratio=16.0, batch_size=200)
    assert report is not None and report[1] is not None
    assert "--batch_size 200" in report[1] and "150 the stream brought each rank" in report[1]
