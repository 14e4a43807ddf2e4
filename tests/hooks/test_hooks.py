"""Built-in hooks: TensorBoard files read back, console logs, early stopping across resume.

`HookList`'s rules: test_hook_list.py; when hooks' requests are acted on:
test_hook_action_points.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy
from hook_training import train

from melissa_trainer import EarlyStoppingHook, OnlineTrainer, TrainerState, TrainingArguments

pytestmark = pytest.mark.timeout(60)


def test_tensorboard_scalars_read_back_with_tensorboards_reader(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    validation = list(linear_samples(16, seed=5))
    trainer = train(
        tmp_path,
        eval_dataset=validation,
        eval_steps=10,
        report_to="tensorboard",
        buffer="reservoir",
        max_sample_reuse=2,
        max_steps=20,
    )
    logdir = Path(trainer.args.output_dir) / "runs"
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in [
        "train/loss",
        "train/learning_rate",
        "train/samples_per_second",
        "buffer/samples",
        "buffer/fill",
        "buffer/got",
        "eval/loss",
    ]:
        assert tag in tags["scalars"], (tag, tags["scalars"])
    assert [e.step for e in acc.Scalars("train/loss")] == [5, 10, 15, 20]
    assert [e.step for e in acc.Scalars("eval/loss")] == [10, 20]
    logged = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert [e.value for e in acc.Scalars("train/loss")] == pytest.approx(logged, rel=1e-6)
    assert "buffer/reuse" in tags["histograms"]


def test_report_to_none_writes_no_event_files(tmp_path: Path) -> None:
    trainer = train(tmp_path, report_to="none", max_steps=5)
    assert not (Path(trainer.args.output_dir) / "runs").exists()


def test_console_logs_when_the_bar_is_disabled(tmp_path: Path, capsys: Any) -> None:
    train(tmp_path, report_to="none", disable_progress_bar=True, max_steps=10)
    out = capsys.readouterr().out
    assert "step 5 | loss" in out and "step 10 | loss" in out
    assert "samples/s" in out and "buffer_fill" in out


def test_early_stopping_patience_survives_resume(tmp_path: Path) -> None:
    hook = EarlyStoppingHook(patience=3)
    # lr 0: nothing improves; validations at 2, 4 leave one validation of patience
    validation = list(linear_samples(16, seed=5))
    args = dict(eval_steps=2, save_steps=4, stop_sync_steps=1, report_to="none")
    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=8,
            max_steps=4,
            disable_progress_bar=True,
            **args,
        ),
        torch.optim.SGD(model.parameters(), lr=0.0),
        train_source=list(linear_samples(800)),
        process_sample=xy,
        hooks=[hook],
        eval_dataset=validation,
    )
    first = trainer.train()
    assert first.validations_since_best == 1 and first.best_step == 2

    resumed = EarlyStoppingHook(patience=3)
    model = small_model()
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(tmp_path / "out"),
            batch_size=8,
            max_steps=100,
            disable_progress_bar=True,
            resume_from_checkpoint="latest",
            **args,
        ),
        torch.optim.SGD(model.parameters(), lr=0.0),
        train_source=list(linear_samples(800)),
        process_sample=xy,
        hooks=[resumed],
        eval_dataset=validation,
    )
    state = trainer.train()
    assert state.best_metric == first.best_metric and state.best_step == 2
    # two more validations without improvement (steps 6 and 8) exhaust the patience
    assert state.global_step == 8 and state.validations_since_best == 3


def test_early_stopping_accepts_the_state_of_earlier_versions(caplog: Any) -> None:
    hook = EarlyStoppingHook(patience=2)
    hook.load_state_dict({"best": 0.5, "bad_validations": 1})
    assert "restarts from 0" in caplog.text
    with pytest.raises(ValueError, match="has no state"):
        hook.load_state_dict({"other": 1})


def test_the_best_metric_is_the_best_finite_value() -> None:
    state = TrainerState()
    for step, value in enumerate([float("nan"), 3.0, 2.0, 2.5, float("inf"), 2.0], 1):
        state.global_step = step
        state.record_metric({"eval_loss": value}, "eval_loss", greater_is_better=False)
    assert (state.best_metric, state.best_step, state.validations_since_best) == (2.0, 3, 3)
    state = TrainerState()
    assert state.record_metric({"m": 1.0}, "m", True) and state.record_metric({"m": 2.0}, "m", True)
    assert state.best_metric == 2.0 and state.validations_since_best == 0
    with pytest.raises(KeyError, match="returned \\['m'\\]: set it"):
        state.record_metric({"m": 1.0}, "eval_loss", False)


def test_log_lines_show_only_the_source_counters_that_are_not_zero() -> None:
    from melissa_trainer.hooks.progress import format_logs

    line = format_logs(
        7,
        {"loss": 0.5, "source_messages": 12.0, "source_rejected_bad_size": 0.0, "x": 0.0},
    )
    assert line == "step 7 | loss 0.5 | messages 12 | x 0"


def test_log_lines_show_counts_exactly() -> None:
    # `samples_put` is how a user checks that a resumed study took every (simulation,
    # time step) once (docs/how-to/own-solver.md): printed `1.234e+04` it could not be
    # checked past 10,000 samples; measures that are not whole numbers keep 4 figures
    from melissa_trainer.hooks.progress import format_logs

    line = format_logs(
        9,
        {
            "loss": 0.012345678,
            "source_samples_put": 123457.0,
            "source_bytes": 5.072e9,
            "buffer_got": 10240.0,
            "samples_per_second": 12345.678,
            "huge": 1e20,
        },
    )
    assert line == (
        "step 9 | loss 0.01235 | samples_put 123457 | bytes 5072000000 | buffer_got 10240"
        " | samples/s 1.235e+04 | huge 1e+20"
    )


def test_tensorboard_renders_the_logs_of_the_flow_hook_without_the_progress_hook(
    tmp_path: Path,
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from melissa_trainer import FlowHook, TensorBoardHook

    logdir = tmp_path / "tb"
    trainer = train(tmp_path, max_steps=10, use_default_hooks=False,
                    hooks=[FlowHook(logging_steps=4), TensorBoardHook(str(logdir))])  # fmt: skip
    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    # every 4 steps, and the final log at the last step
    assert [e.step for e in acc.Scalars("train/loss")] == [4, 8, 10]
    assert trainer.state.last_log_step == 10


def test_a_resumed_run_says_which_checkpoint_it_resumed_from(tmp_path: Path, capsys: Any) -> None:
    train(tmp_path, max_steps=3, save_at_end=True, report_to="none")
    capsys.readouterr()
    train(tmp_path, max_steps=5, resume_from_checkpoint="latest", report_to="none",
          disable_progress_bar=True)  # fmt: skip
    out = capsys.readouterr().out
    assert f"step 3 | resumed from {tmp_path / 'out' / 'checkpoints' / 'checkpoint-3'}" in out
    train(tmp_path / "fresh", max_steps=2, report_to="none", disable_progress_bar=True)
    assert "resumed" not in capsys.readouterr().out  # a fresh run says nothing of the kind


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"eval_steps": 5}, "eval_steps=5 asks for validation"),
        ({"early_stopping_patience": 2}, "early_stopping_patience=2 asks for validation"),
    ],
)
def test_validation_asked_for_without_an_eval_dataset_is_refused_before_training(
    tmp_path: Path, overrides: dict[str, Any], named: str
) -> None:
    """A user's script passed --eval_steps 5 and no eval_dataset: the run trained 65
    steps without one validation and without a word (early stopping alike: it never
    stops). Refused when the trainer is made, naming the setting and the fix."""
    with pytest.raises(ValueError, match=named) as caught:
        train(tmp_path, **overrides)
    assert "eval_dataset=" in str(caught.value)
    assert not (tmp_path / "out" / "checkpoints").exists()
