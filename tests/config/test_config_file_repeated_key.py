"""A key given twice in a ``--config`` file (htrial44): ``batch_size: 8`` and, further
down, ``batch_size: 16`` trained with 16 without a word (YAML's and JSON's readers keep
the last value). Now the file is refused, naming the key; nested mappings and a key given
once in the file and once on the command line (the flag wins, documented) are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer import ArgumentParser, TrainingArguments
from melissa_trainer.config.reading import ConfigError, load_config_file


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("run.yaml", "batch_size: 8\nseed: 3\nbatch_size: 16\n"),
        ("run.json", '{"batch_size": 8, "seed": 3, "batch_size": 16}'),
    ],
)
def test_a_repeated_key_is_refused_naming_it(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match="'batch_size' more than once"):
        load_config_file(path)


@pytest.mark.timeout(30)
def test_the_command_line_refusal_names_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("batch_size: 8\nbatch_size: 16\n")
    with pytest.raises(SystemExit) as exc:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--config", str(path), "--output_dir", str(tmp_path / "out")]
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "run.yaml" in err and "'batch_size' more than once" in err, err


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("name", "text"),
    [
        # the same key in two nested mappings, and once at the top: no repetition
        ("run.yaml", "batch_size: 8\nextra:\n  a: 1\nother:\n  a: 2\n"),
        ("run.json", '{"batch_size": 8, "extra": {"a": 1}, "other": {"a": 2}}'),
    ],
)
def test_keys_repeated_only_in_nested_mappings_are_taken(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert load_config_file(path)["batch_size"] == 8


@pytest.mark.timeout(30)
def test_a_flag_still_overrides_the_files_value(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("batch_size: 8\n")
    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses(
        ["--config", str(path), "--batch_size", "16", "--output_dir", str(tmp_path / "o")]
    )
    assert args.batch_size == 16
