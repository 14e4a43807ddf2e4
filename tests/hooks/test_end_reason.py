"""The end-of-run line says why the run ended: the stream's end, `max_steps`, a
signal, or a hook's stop request naming the hook (a run stopped by a hook used to print
"end of training" as one that trained to its end did, and a user could not tell why it
stopped before `max_steps`). The oracle is what each run was set up to end by."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)
N = 400  # samples streamed: 50 steps of 8


class StopAtStep(Hook):
    """Sets `control.should_stop` directly (the transformers idiom) at step `step`."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step >= self.step:
            control.should_stop = True


def run(tmp_path: Path, hooks: list[Hook], eval_dataset: Any = None, **overrides: Any) -> str:
    """`ended_by` of a run of `N` samples (SGD at `lr`, 1e-2 by default)."""
    lr = overrides.pop("lr", 1e-2)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), report_to="none", disable_progress_bar=True,
        save_at_end=False, batch_size=8, buffer="fifo", stop_sync_steps=1, **overrides,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=lr),
        train_source=list(linear_samples(N)), process_sample=xy, hooks=hooks,
        eval_dataset=eval_dataset,
    )  # fmt: skip
    trainer.train()
    return trainer.ended_by


def end_line(out: str) -> str:
    (line,) = [ln for ln in out.splitlines() if "each sample trained on" in ln]
    return line


def test_a_hook_that_stops_the_run_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ended = run(tmp_path, [StopAtStep(5)])
    line = end_line(capsys.readouterr().out)
    assert line.startswith(
        "step 5 | stopped by a hook, StopAtStep.on_step_end set control.should_stop: "
    ), line
    assert "end of training" not in line
    assert ended == "stopped by a hook, StopAtStep.on_step_end set control.should_stop"


def test_early_stopping_says_so_with_its_metric_and_patience(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # lr 0: the model never changes, so no validation after the first is better and the
    # second one (step 4) stops the run with patience 1
    evals = list(linear_samples(16, seed=1))
    run(tmp_path, [], evals, eval_steps=2, early_stopping_patience=1, lr=0.0)
    line = end_line(capsys.readouterr().out)
    assert re.match(
        r"step 4 \| stopped by a hook, early stopping: no better eval_loss than [\d.e+-]+ "
        r"\(step 2\) in 1 validations \(patience 1\): each sample",
        line,
    ), line


def test_max_steps_and_the_end_of_stream_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path / "a", [], max_steps=3) == "max_steps 3 reached"
    assert end_line(capsys.readouterr().out).startswith(
        "step 3 | end of training (max_steps 3 reached): each sample"
    )
    assert run(tmp_path / "b", []) == "end of stream"
    assert end_line(capsys.readouterr().out).startswith(
        f"step {N // 8} | end of training (end of stream): each sample"
    )
    # FIFO: each sample once, so max_steps is more than the data gives: the line says
    # the run ended short of it, and why
    assert run(tmp_path / "c", [], max_steps=1000) == "end of stream, before max_steps 1000"
    assert end_line(capsys.readouterr().out).startswith(
        f"step {N // 8} | end of training (end of stream, before max_steps 1000): each sample"
    )


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_stop_asked_on_one_rank_is_named_where_it_was_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ranks, the hook's stop on rank 1 alone: both stop at one step; rank 1 names
    the hook, and so does rank 0 (which prints the end-of-run line), with the rank that
    asked and the step it asked at (before, rank 0 said only "stopped by a hook on
    another rank": the test failed there)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import launch_two_ranks

    script = Path(__file__).parents[1] / "scripts" / "hook_stop_one_rank.py"
    done = launch_two_ranks(script, str(tmp_path / "out"))
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    # (each rank's record in a file of its own: the ranks share one stdout, where a line
    # of one was once cut in two by the other's)
    records = [(tmp_path / "out" / f"ended_{rank}.txt").read_text().rstrip("\n") for rank in "01"]
    ended = [(rank, *record.split(" ", 1)) for rank, record in zip("01", records, strict=True)]
    assert [(rank, step) for rank, step, _ in ended] == [("0", ended[0][1]), ("1", ended[0][1])]
    assert 5 <= int(ended[0][1]) <= 8, ended  # within two windows of 2 steps of the stop
    hook = "StopOnRankOne.on_step_end set control.should_stop"
    assert ended[0][2] == f"stopped by a hook on rank 1, {hook} (asked at step 5)"
    assert ended[1][2] == f"stopped by a hook, {hook}"
    step = ended[0][1]
    assert f"step {step} | stopped by a hook on rank 1, {hook} (asked at step 5): " in text
