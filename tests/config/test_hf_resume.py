"""Hugging Face's resume idioms: ``TrainingArguments(resume_from_checkpoint=True)`` (HF:
the last checkpoint in output_dir) is ``"latest"`` here (before: refused with YAML's
advice to quote it, wrong in Python code); ``trainer.train(resume_from_checkpoint=...)``
(HF's place) is a TypeError naming the argument to set (before: Python's bare
"unexpected keyword argument")."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.config.reading import ConfigError
from tests.helpers import linear_samples, small_model, xy


@pytest.mark.parametrize(("given", "made"), [(True, "latest"), (False, None)])
def test_a_boolean_resume_is_hugging_faces(tmp_path: Path, given: bool, made: str | None) -> None:
    args = TrainingArguments(output_dir=str(tmp_path), resume_from_checkpoint=given)
    assert args.resume_from_checkpoint == made


def test_a_boolean_for_a_string_says_what_to_do_in_code(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        TrainingArguments(output_dir=str(tmp_path), logging_dir=True)
    said = str(caught.value)
    assert "logging_dir=True is a boolean, not a string: quote it in a YAML file" in said
    assert "in code, give a string" in said


@pytest.mark.parametrize("value", [True, "latest"])
def test_train_names_where_a_resume_goes(tmp_path: Path, value: object) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=4, buffer="fifo", buffer_size=32,
        report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), lr=0.1),
                            train_source=list(linear_samples(8)), process_sample=xy)  # fmt: skip
    with pytest.raises(TypeError) as caught:
        trainer.train(resume_from_checkpoint=value)  # type: ignore[arg-type]
    said = str(caught.value)
    assert "TrainingArguments(resume_from_checkpoint=...)" in said
    assert ("'latest', the newest checkpoint" in said) == (value is True)
    assert trainer.train().global_step == 2  # nothing was started: it trains after
