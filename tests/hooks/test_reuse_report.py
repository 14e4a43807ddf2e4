"""The end-of-run line on sample reuse and its warning (issue 30): a run that ended with
its stream after training on each sample about once is warned about, naming the options
that change it; the library's defaults (a reservoir with a sample-to-insert ratio) are
not. The oracle is the number of samples streamed (each an in-process sample)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainerState, TrainingArguments
from melissa_trainer.hooks.reuse import reuse_report

pytestmark = pytest.mark.timeout(120)
N = 80  # samples streamed


def run(tmp_path: Path, **overrides: Any) -> tuple[OnlineTrainer, Any]:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=False, **overrides,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(N)), process_sample=xy,
    )  # fmt: skip
    return trainer, trainer.train()


def end_line(out: str) -> tuple[float, int, int]:
    """(mean reuse, samples trained on, inserts) of the end-of-run line in `out` (one
    rank: the samples trained on are the draws, and the line names no draws apart)."""
    found = re.findall(
        r"end of training(?: \([^)]*\))?: each sample trained on ([\d.]+) times on average "
        r"\((\d+) samples trained on, of (\d+) inserted, all ranks\)",
        out,
    )
    assert len(found) == 1, out
    reuse, trained, inserts = found[0]
    return float(reuse), int(trained), int(inserts)


def reuse_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "used each sample" in r.getMessage()
    ]


def test_a_fifo_run_that_trained_once_is_warned_about_naming_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        _, state = run(tmp_path, buffer="fifo", batch_size=8)
    assert state.stream_ended and state.samples_seen == N
    assert end_line(capsys.readouterr().out) == (1.0, N, N)
    (warning,) = reuse_warnings(caplog)
    assert "--buffer reservoir --sample_to_insert_ratio N" in warning
    assert "--pseudo_epochs N" in warning
    assert f"after {state.global_step} steps" in warning


def test_the_defaults_train_each_sample_many_times_and_are_not_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        trainer, state = run(tmp_path)  # no buffer option: the library's defaults
    reuse, draws, inserts = end_line(capsys.readouterr().out)
    assert inserts == N and draws == state.samples_seen == trainer.buffer.stats().got
    assert reuse == pytest.approx(draws / N, abs=0.05)
    # the default ratio's draws per insert, within its tolerance: far from once
    assert reuse >= 8
    assert state.stream_ended and not reuse_warnings(caplog)


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_steps": 3},  # the run chose its length
        {"pseudo_epochs": 2},  # each sample twice
    ],
    ids=["max_steps", "pseudo_epochs"],
)
def test_runs_that_chose_their_length_or_replayed_are_not_warned_about(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    overrides: dict[str, Any],
) -> None:
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        _, state = run(tmp_path, buffer="fifo", batch_size=8, **overrides)
    reuse, draws, _ = end_line(capsys.readouterr().out)
    assert draws == state.samples_seen
    if "pseudo_epochs" in overrides:
        assert reuse == 2.0  # above the warning's 1.5
    else:
        assert not state.stream_ended and draws == 3 * 8
    assert not reuse_warnings(caplog)


def test_a_stream_below_the_watermark_is_warned_about_naming_the_watermark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The heat example shrunk (`--num_simulations 16 --time_steps 20`: 320 samples
    against its watermark of 500) trained on each sample once with a reservoir and a
    ratio of 8, and the warning advised a reservoir and a ratio: the cause, the
    watermark, is named instead. The oracle: N samples < the watermark given."""
    watermark = N + 20
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        _, state = run(tmp_path, batch_size=8, watermark=watermark)  # reservoir, ratio
    reuse, draws, inserts = end_line(capsys.readouterr().out)
    assert (reuse, draws, inserts) == (1.0, N, N)  # only the end-of-stream drain
    (warning,) = reuse_warnings(caplog)
    assert f"--watermark {watermark}" in warning
    assert "lower --watermark" in warning
    assert "--sample_to_insert_ratio N" not in warning  # advice that would change nothing


def test_a_ratio_that_could_not_act_is_not_advised_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The guide's multi-process line once gave each rank a watermark of 80% of its share
    of the stream: the reservoir and its ratio of 16 were in effect, training waited for
    the watermark, the stream ended soon after, each sample was trained on once, and the
    warning advised the reservoir and the ratio already in effect (a user's report). It
    names the watermark's share instead. The oracle: N samples, the watermark given."""
    watermark = N // 2
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        _, state = run(tmp_path, batch_size=8, watermark=watermark)  # reservoir, ratio 16
    reuse, _, inserts = end_line(capsys.readouterr().out)
    assert inserts == N and reuse < 1.5 and state.stream_ended
    (warning,) = reuse_warnings(caplog)
    assert "reservoir drawing each sample up to 16 times was in effect" in warning
    assert f"--watermark {watermark} samples, 50% of the {N} each rank received" in warning
    assert "--sample_to_insert_ratio N" not in warning  # advice that would change nothing


def test_the_line_counts_the_samples_trained_on_and_names_other_draws() -> None:
    """Two ranks: a rank whose data ran out first trains on its last batches again (not
    drawn), and batches drawn ahead of a stop are not trained on; the line's mean reuse
    is of the samples trained on, the state's count, and the draws are named apart (a
    two-rank run printed "130 steps on 4146 samples" and "4130 draws" unexplained)."""
    state = TrainerState(global_step=130, total_samples_seen=4146, stream_ended=True)
    state.append_log({"buffer_put": 1000.0, "buffer_got": 4130.0})
    report = reuse_report(state, watermark=10, num_processes=2)
    assert report is not None
    line, warning = report
    assert line.startswith(
        "step 130 | end of training: each sample trained on 4.1 times on average "
        "(4146 samples trained on, of 1000 inserted, all ranks; 4130 drawn from the buffers"
    )
    assert warning is None
    state.total_samples_seen = 4130  # as many trained on as drawn: nothing to explain
    line, _ = reuse_report(state) or ("", None)
    assert line.endswith("(4130 samples trained on, of 1000 inserted, all ranks)")


def test_one_rank_names_the_batches_drawn_ahead_of_a_stop_in_its_own_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rank, stopped by a hook: the loop draws the next window's batches before it
    sees the stop (`stop_sync_steps` of them), so the buffer gave more than was trained
    on. The line says so in one rank's terms, never the padding of a rank "whose data
    ran out first" (a one-rank run SIGTERMed printed the two-rank reasons). The oracle:
    the hook's stop step and the window size give the steps trained and the batches
    drawn ahead; the dataset still holds exactly those, and so does the checkpoint
    written at the stop."""
    from melissa_trainer import Hook, TrainerControl
    from melissa_trainer.checkpoint.paths import rank_path
    from melissa_trainer.common.checkpoint_names import latest_checkpoint
    from melissa_trainer.core.pending_file import read_pending

    window, batch = 4, 8

    class StopAt2(Hook):
        def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
            if state.global_step == 2:
                control.should_stop = True

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=True, batch_size=batch, stop_sync_steps=window, buffer="fifo",
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.Adam(model.parameters(), lr=1e-2),
        train_source=list(linear_samples(N)), process_sample=xy, hooks=[StopAt2()],
    )  # fmt: skip
    state = trainer.train()
    out = capsys.readouterr().out
    assert state.global_step == window  # the stop takes effect at the window's end
    assert trainer.dataset.num_pending == window  # the next window, drawn, not trained
    trained, ahead = window * batch, window * batch
    assert state.total_samples_seen == trained
    assert trainer.buffer.stats().got == trained + ahead
    assert (
        f"({trained} samples trained on, of {N} inserted, all ranks; {trained + ahead} drawn "
        f"from the buffer: the last {ahead} were drawn ahead of the stop and not trained on "
        "(a checkpoint written at the stop keeps them: a resume trains on them first))"
    ) in out
    assert "ran out first" not in out and "every rank" not in out
    # the checkpoint written at the stop keeps the batches drawn ahead, as the line says
    checkpoint = latest_checkpoint(trainer.checkpoint_root)
    assert checkpoint is not None
    pending = read_pending(rank_path(checkpoint, 0))
    assert sum(len(b) for b in pending) == ahead
