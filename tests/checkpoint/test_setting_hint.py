"""The phrase every hint uses to name a setting to change: true for a script that builds
`TrainingArguments` in Python (a keyword) and for one that parses a command line (a flag),
and each phrase is a setting `TrainingArguments` and the parser accept as written."""

from __future__ import annotations

import shlex

import pytest

from melissa_trainer import TrainingArguments
from melissa_trainer.common.setting import setting
from melissa_trainer.config.parser import ArgumentParser


@pytest.mark.parametrize(
    ("field", "value", "python", "flag"),
    [
        ("resume_from_checkpoint", "latest", "resume_from_checkpoint='latest'",
         "--resume_from_checkpoint latest"),
        ("overwrite_output_dir", True, "overwrite_output_dir=True", "--overwrite_output_dir"),
        ("on_save_error", "continue", "on_save_error='continue'", "--on_save_error continue"),
    ],
)  # fmt: skip
def test_the_phrase_names_the_keyword_and_the_flag_and_both_are_accepted(
    tmp_path: object, field: str, value: object, python: str, flag: str
) -> None:
    phrase = setting(field, value)
    assert phrase == f"{python} ({flag} on the command line)"
    # the keyword, as written, is one TrainingArguments takes
    keyword = eval(f"dict({python})")  # noqa: S307 - our own phrase, a literal
    args = TrainingArguments(output_dir=str(tmp_path), **keyword)
    assert getattr(args, field) == value
    # the flag, as written, is one the parser takes
    (parsed,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), *shlex.split(flag)]
    )
    assert getattr(parsed, field) == value


def test_a_placeholder_is_shown_unquoted() -> None:
    assert setting("resume_from_checkpoint", "PATH", placeholder=True) == (
        "resume_from_checkpoint=PATH (--resume_from_checkpoint PATH on the command line)"
    )
