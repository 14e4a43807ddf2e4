"""``--resume_from_checkpoint true`` (Hugging Face's boolean, as a command-line word) is
``"latest"``, as ``TrainingArguments(resume_from_checkpoint=True)`` already is, and
``false`` is no resume; a path stays a path. The words are read as booleans whether or
not a directory of that name exists (``./true`` names such a directory). Before: the
word was a path, refused as "resume_from_checkpoint='true' is not a directory"."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer import TrainingArguments
from melissa_trainer.config.parser import ArgumentParser


def parsed(tmp_path: Path, word: str) -> str | None:
    argv = ["--output_dir", str(tmp_path / "out"), "--resume_from_checkpoint", word]
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    value: str | None = args.resume_from_checkpoint
    return value


@pytest.mark.parametrize("word", ["true", "True", "TRUE"])
def test_true_on_the_command_line_is_latest(tmp_path: Path, word: str) -> None:
    assert parsed(tmp_path, word) == "latest"


@pytest.mark.parametrize("word", ["false", "False"])
def test_false_on_the_command_line_is_no_resume(tmp_path: Path, word: str) -> None:
    assert parsed(tmp_path, word) is None


def test_the_words_in_a_config_file_and_in_code_mean_the_same(tmp_path: Path) -> None:
    config = tmp_path / "run.json"
    config.write_text('{"resume_from_checkpoint": "true"}')
    argv = ["--output_dir", str(tmp_path / "out"), "--config", str(config)]
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(argv)
    assert args.resume_from_checkpoint == "latest"
    made = TrainingArguments(output_dir=str(tmp_path), resume_from_checkpoint="false")
    assert made.resume_from_checkpoint is None


def test_a_path_stays_a_path_and_dot_slash_names_a_directory_called_true(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = tmp_path / "checkpoint-7"
    checkpoint.mkdir()
    assert parsed(tmp_path, str(checkpoint)) == str(checkpoint)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "true").mkdir()
    assert parsed(tmp_path, "true") == "latest"  # the word, although ./true exists
    assert parsed(tmp_path, "./true") == "./true"
    assert parsed(tmp_path, "latest") == "latest"


def test_the_help_says_what_true_means(capsys: pytest.CaptureFixture[str]) -> None:
    ArgumentParser(TrainingArguments).print_help()
    said = " ".join(capsys.readouterr().out.split())
    assert "true (as Hugging Face's True) is latest" in said, said
