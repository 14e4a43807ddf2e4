"""What making a `TrainingArguments` checks (`config.argument_making`, moved out of
`config.arguments` as it is): its warnings are said at the line that made the
arguments (the caller of the constructor, not the library's frames), its refusals
name every problem together, and a dataclass subclass's own fields are known."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from melissa_trainer import ConfigError, TrainingArguments
from melissa_trainer.config.reading import UnknownArgumentError

pytestmark = pytest.mark.timeout(60)


def test_the_direction_warning_is_said_at_the_callers_line() -> None:
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        TrainingArguments(greater_is_better=True, report_to="none")  # (eval_loss: warned)
    mine = [w for w in said if "greater_is_better" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in said]
    assert mine[0].filename == __file__, mine[0].filename


def test_every_problem_is_named_together() -> None:
    with pytest.raises(ConfigError) as raised:
        TrainingArguments(max_grad_norm=0.0, batch_size=0, report_to="none")
    message = str(raised.value)
    assert "max_grad_norm=0.0 must be > 0" in message and "batch_size" in message, message
    assert "TrainingArguments" in message, message


def test_a_subclass_fields_are_known_and_a_typo_named() -> None:
    @dataclasses.dataclass
    class Mine(TrainingArguments):
        width: int = 8

    assert Mine(width=16, report_to="none").width == 16
    with pytest.raises(UnknownArgumentError) as raised:
        Mine(widht=16)
    assert "widht" in str(raised.value) and "width" in str(raised.value), raised.value
