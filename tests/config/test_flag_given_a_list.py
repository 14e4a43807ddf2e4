"""A flag given several values where it takes one (htrial44): Hugging Face's
``--report_to tensorboard wandb`` was refused as ``unrecognized arguments: wandb``, a bare
word with no flag named, where the user had given a list that ``transformers`` takes.
Now the stray word names the flag before it, and for ``--report_to`` that one reporter is
taken here; a stray ``args.json`` keeps its own hint (``--config``)."""

from __future__ import annotations

import pytest

from melissa_trainer import ArgumentParser, TrainingArguments


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The parser's error line for `argv` (it exits with argparse's status 2)."""
    with pytest.raises(SystemExit) as exc:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "argv",
    [
        ["--report_to", "tensorboard", "wandb"],
        ["--report_to=tensorboard", "wandb"],
        ["--report-to", "tensorboard", "wandb", "--seed", "1"],
    ],
)
def test_report_to_given_a_list_names_the_flag(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(argv, capsys)
    assert "wandb (--report" in line and "takes one value" in line, line
    assert "one reporter here" in line, line


@pytest.mark.timeout(30)
def test_another_one_value_flag_given_two_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    line = refusal(["--batch_size", "8", "16"], capsys)
    assert "16 (--batch_size takes one value)" in line, line


@pytest.mark.timeout(30)
def test_a_stray_file_keeps_the_config_hint(capsys: pytest.CaptureFixture[str]) -> None:
    line = refusal(["--max_steps", "3", "args.json"], capsys)
    assert "a file of arguments is given as --config args.json" in line, line
    assert "takes one value" not in line, line


@pytest.mark.timeout(30)
def test_a_stray_word_with_no_flag_before_it_gets_no_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # a word with no flag before it that takes one value: no guess at a cause
    line = refusal(["wandb"], capsys)
    assert line.endswith("unrecognized arguments: wandb"), line
