"""A `metric_for_best_model` that no validation returns is a refused start, said on one
line with exit status 2 inside `refusals_end_the_program`, as a bad flag value is
(user trial htrial46: ``--metric_for_best_model accuracy``, an HF user's usual metric,
ended in a 20-line traceback and exit status 1, where ``--batch_size 0`` or
``--watermark 20000`` end in one line, status 2: the check raised a plain ValueError)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from melissa_trainer import OnlineTrainer, TrainingArguments, refusals_end_the_program

VAL = [{"x": torch.zeros(2), "y": torch.zeros(1)}]


def _trainer(tmp_path: Path, metric: str) -> OnlineTrainer:
    model = torch.nn.Linear(2, 1)
    args = TrainingArguments(
        output_dir=str(tmp_path), report_to="none", metric_for_best_model=metric
    )
    return OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.1),
        train_source=[],
        process_sample=lambda s: (s["x"], s["y"]),
        eval_dataset=VAL,
    )


@pytest.mark.timeout(60)
def test_an_unknown_metric_ends_the_program_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited, refusals_end_the_program():
        _trainer(tmp_path, "accuracy")
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.endswith(
        "error: metric_for_best_model='accuracy' is not a metric the validation returns: "
        "eval_loss; set it to one of them, or declare it in the eval_keys of the hook "
        "whose eval_figures returns it"
    )


@pytest.mark.timeout(60)
def test_it_is_still_a_value_error_outside(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="metric_for_best_model='accuracy' is not a metric"):
        _trainer(tmp_path, "accuracy")
    _trainer(tmp_path / "ok", "loss")  # eval_loss, read with its prefix: accepted
