"""`save_seconds`, the wall-clock checkpoint cadence: on by default (every 600 s), off
with None (``--save_seconds none``), and a value that is not a finite number > 0 refused
when the arguments are made, naming the field and the fix, before anything starts.
Before it existed, a run at the defaults wrote no checkpoint until its end."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer import TrainingArguments
from melissa_trainer.checkpoint.resumed_args import changed_settings
from melissa_trainer.config.parser import ArgumentParser
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.hooks import FlowHook, default_hooks


def test_the_default_checkpoints_every_ten_minutes(tmp_path: Path) -> None:
    args = TrainingArguments(output_dir=str(tmp_path))
    assert args.save_seconds == 600.0 and args.save_steps is None
    (flow,) = [h for h in default_hooks(args, has_eval=False) if isinstance(h, FlowHook)]
    assert flow.timed is not None and flow.timed.seconds == 600.0


@pytest.mark.parametrize(("word", "value"), [("none", None), ("30", 30.0), ("0.5", 0.5)])
def test_the_command_line(tmp_path: Path, word: str, value: float | None) -> None:
    argv = ["--output_dir", str(tmp_path), "--save_seconds", word]
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    assert args.save_seconds == value
    (flow,) = [h for h in default_hooks(args, has_eval=False) if isinstance(h, FlowHook)]
    assert (flow.timed is None) == (value is None)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (0, "save_seconds=0.0 must be > 0"),
        (-5, "save_seconds=-5.0 must be > 0"),
        (float("inf"), "save_seconds=inf is not finite"),
        (float("nan"), "save_seconds=nan is not finite"),
        ("often", "save_seconds='often'"),
    ],
)
def test_a_bad_value_is_refused_naming_the_field_and_the_fix(
    tmp_path: Path, value: object, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        TrainingArguments(output_dir=str(tmp_path), save_seconds=value)  # type: ignore[arg-type]
    assert said in str(caught.value)
    if "must be > 0" in said:
        assert "or None (--save_seconds none)" in str(caught.value)


def test_a_resume_with_another_cadence_is_no_change_of_the_run() -> None:
    assert changed_settings({"save_seconds": 600.0}, {"save_seconds": 60.0}) == []
