"""The dataclass `ArgumentParser`: defaults and types, hyphen and bool forms, errors
that exit 2 naming the flag or the file key, one conversion for files and flags, parser
defaults shown in the help, configuration files overridden by the command line,
`parse_dict`, required fields, and a script reading its real command line."""

from __future__ import annotations

import dataclasses
import enum
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal, Optional

import pytest

import melissa_trainer.config.arguments as arguments_module
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.parser import ArgumentParser
from melissa_trainer.config.reading import ConfigError


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class ModelArgs:
    lr: float = dataclasses.field(default=1e-3, metadata={"help": "Learning rate."})
    hidden: Optional[int] = None  # noqa: UP045 (exercise typing.Optional)
    name: str | None = None
    act: Literal["relu", "gelu"] = "relu"
    color: Color = Color.RED
    sizes: list[int] = dataclasses.field(default_factory=lambda: [1, 2])
    use_bias: bool = True


@dataclasses.dataclass
class Required:
    width: int


def parse(*argv: str) -> tuple[TrainingArguments, ModelArgs]:
    targs, margs = ArgumentParser(TrainingArguments, ModelArgs).parse_args_into_dataclasses(
        list(argv)
    )
    return targs, margs


def test_cli_defaults_and_types() -> None:
    targs, margs = parse()
    assert targs == TrainingArguments() and margs == ModelArgs()
    targs, margs = parse(
        "--batch_size", "64", "--buffer", "reservoir", "--sample_to_insert_ratio", "0.5",
        "--lr", "3e-4", "--hidden", "7", "--name", "net", "--act", "GELU", "--color", "blue",
        "--sizes", "3", "4", "5", "--output_dir=runs/x",
    )  # fmt: skip
    assert (targs.batch_size, targs.buffer, targs.sample_to_insert_ratio) == (64, "reservoir", 0.5)
    assert targs.output_dir == "runs/x"
    assert margs == ModelArgs(3e-4, 7, "net", "gelu", Color.BLUE, [3, 4, 5], True)


def test_cli_optional_and_hyphen_forms() -> None:
    targs, margs = parse("--max-steps", "10", "--eval_steps", "none", "--hidden", "null")
    assert targs.max_steps == 10 and targs.eval_steps is None and margs.hidden is None
    targs, _ = parse("--gradient-accumulation-steps", "2", "--mixed-precision", "bf16")
    assert (targs.gradient_accumulation_steps, targs.mixed_precision) == (2, "bf16")


@pytest.mark.parametrize(
    ("argv", "save_at_end", "disable_progress_bar"),
    [
        ([], True, False),
        (["--disable_progress_bar"], True, True),
        (["--disable_progress_bar", "false"], True, False),
        (["--disable-progress-bar", "yes"], True, True),
        (["--save_at_end", "False"], False, False),
        (["--no_save_at_end"], False, False),
        (["--no-save-at-end", "--disable_progress_bar", "--batch_size", "2"], False, True),
    ],
)
def test_cli_bool_forms(argv: list[str], save_at_end: bool, disable_progress_bar: bool) -> None:
    targs, _ = parse(*argv)
    assert targs.save_at_end is save_at_end
    assert targs.disable_progress_bar is disable_progress_bar


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch_size", "abc"], "argument --batch_size: 'abc' is not an integer"),
        (["--lr", "fast"], "argument --lr: 'fast' is not a number"),
        (
            ["--buffer", "lifo"],
            "argument --buffer: invalid choice: 'lifo' (choose from fifo, firo, reservoir)",
        ),
        (["--act", "tanh"], "invalid choice: 'tanh'"),
        (["--use_bias", "maybe"], "argument --use_bias: 'maybe' is not a boolean"),
        (["--batch_size", "0"], "argument --batch_size: batch_size=0 must be a positive integer"),
        (
            ["--buffer_size", "4", "--watermark", "5", "--batch_size", "2"],
            "argument --watermark: watermark=5 is larger than buffer_size=4",
        ),
        (
            ["--buffer", "fifo", "--sample_to_insert_ratio", "1"],
            "argument --sample_to_insert_ratio: sample_to_insert_ratio=1.0 only applies to "
            "buffer='reservoir'",
        ),
        (["--config", "nowhere.json"], "argument --config: config file 'nowhere.json' does not"),
        (["--batchsize", "3"], "unrecognized arguments: --batchsize 3"),
        (["--batchsize", "3"], "did you mean --batch_size?"),
        (["--batch", "3"], "unrecognized arguments: --batch 3"),  # no abbreviations
    ],
)
def test_cli_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse(*argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and ": error: " in err and "Traceback" not in err


def test_cli_reports_every_problem_with_its_flag_or_file_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("batch_size: 0\nbufer: fifo\n")
    with pytest.raises(SystemExit) as info:
        parse("--config", str(path))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"in --config {path}, unknown key 'bufer': did you mean 'buffer'?" in err
    path.write_text("batch_size: 0\n")
    with pytest.raises(SystemExit, match="^2$"):
        parse("--config", str(path), "--logging_steps", "0")
    err = capsys.readouterr().err
    assert f"in --config {path}, key 'batch_size': batch_size=0 must be a positive" in err
    assert "argument --logging_steps: logging_steps=0 must be a positive integer" in err


@pytest.mark.parametrize("word", ["yes", "No", "ON", "off", "1", "0", "t", "F"])
def test_one_conversion_for_files_and_flags(word: str) -> None:
    from_file = TrainingArguments.from_dict({"save_at_end": word}).save_at_end
    from_flag = parse("--save_at_end", word)[0].save_at_end
    assert from_file is from_flag is (word.lower() in ("yes", "on", "1", "t"))
    # whole numbers written as floats, and the none words, read the same either way
    args = TrainingArguments.from_dict({"buffer_size": "1e3", "max_steps": "none"})
    assert (args.buffer_size, args.max_steps) == (1000, None)
    targs, _ = parse("--buffer_size", "1e3", "--max_steps", "none")
    assert (targs.buffer_size, targs.max_steps) == (1000, None)


HEAT_LIKE = {"buffer": "reservoir", "buffer_size": 4000, "watermark": 500, "eval_steps": 500}


def test_parser_defaults_show_in_help_and_are_overridable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = ArgumentParser(TrainingArguments, ModelArgs, defaults={**HEAT_LIKE, "lr": 0.5})
    with pytest.raises(SystemExit, match="^0$"):
        parser.parse_args_into_dataclasses(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "Buffer policy. One of: fifo, firo, reservoir. (default: reservoir)" in out
    assert "(per rank). (default: 4000)" in out and "stream ends. (default: 500)" in out
    assert "Validate every this many steps. (default: 500)" in out
    assert "only at the end" not in out.split("--eval_steps")[1].split("--")[0]
    assert "Learning rate. (default: 0.5)" in out
    targs, margs = parser.parse_args_into_dataclasses([])
    assert (targs.buffer, targs.buffer_size, targs.watermark, targs.eval_steps) == (
        "reservoir", 4000, 500, 500,
    )  # fmt: skip
    assert margs.lr == 0.5
    # a file overrides the parser's defaults, the command line overrides the file
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"buffer_size": 600, "watermark": 100}))
    targs, _ = parser.parse_args_into_dataclasses(["--config", str(path), "--watermark", "50"])
    assert (targs.buffer, targs.buffer_size, targs.watermark) == ("reservoir", 600, 50)
    assert parser.parse_dict({"seed": 1})[0].buffer_size == 4000
    with pytest.raises(ValueError, match="did you mean 'buffer_size'"):
        ArgumentParser(TrainingArguments, defaults={"buffer_sise": 3})


def test_remaining_strings() -> None:
    parser = ArgumentParser(TrainingArguments)
    targs, rest = parser.parse_args_into_dataclasses(
        ["--seed", "1", "--foo", "bar"], return_remaining_strings=True
    )
    assert targs.seed == 1 and rest == ["--foo", "bar"]


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_config_file_then_cli_override(tmp_path: Path, suffix: str) -> None:
    values = {"batch_size": 16, "buffer": "firo", "lr": 0.5, "use_bias": False, "max_steps": 9}
    path = tmp_path / f"config{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(values))
    else:
        path.write_text("".join(f"{k}: {str(v).lower()}\n" for k, v in values.items()))
    targs, margs = parse("--config", str(path), "--batch_size", "8", "--use_bias")
    assert (targs.batch_size, targs.buffer, targs.max_steps) == (8, "firo", 9)
    assert margs.lr == 0.5 and margs.use_bias is True
    parser = ArgumentParser(TrainingArguments, ModelArgs)
    load = parser.parse_json_file if suffix == ".json" else parser.parse_yaml_file
    targs, margs = load(path)
    assert targs.batch_size == 16 and margs.use_bias is False


def test_parse_dict_two_dataclasses_and_unknown_keys() -> None:
    parser = ArgumentParser([TrainingArguments, ModelArgs])
    targs, margs = parser.parse_dict({"seed": 3, "lr": "1e-2", "color": "BLUE", "act": "gelu"})
    assert targs.seed == 3 and margs.lr == 0.01 and margs.color is Color.BLUE
    with pytest.raises(ConfigError, match="unknown key 'hiden': did you mean 'hidden'?"):
        parser.parse_dict({"hiden": 3})
    targs, _ = parser.parse_dict({"seed": 3, "extra": 1}, allow_extra_keys=True)
    assert targs.seed == 3
    with pytest.raises(ConfigError, match=r"lr='fast' is invalid"):
        parser.parse_dict({"lr": "fast"})


def test_required_fields_and_clashes(capsys: pytest.CaptureFixture[str]) -> None:
    parser = ArgumentParser(Required)
    assert parser.parse_args_into_dataclasses(["--width", "3"]) == (Required(3),)
    with pytest.raises(SystemExit, match="^2$"):
        parser.parse_args_into_dataclasses([])
    assert "required: --width" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="width is required"):
        parser.parse_dict({})
    with pytest.raises(ValueError, match="defined by both"):
        ArgumentParser(TrainingArguments, TrainingArguments)
    with pytest.raises(TypeError, match="not a dataclass"):
        ArgumentParser(int)


def test_help_mentions_fields(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="^0$"):
        ArgumentParser(TrainingArguments, ModelArgs).parse_args_into_dataclasses(["--help"])
    out = capsys.readouterr().out
    assert "--batch_size" in out and "Samples per batch on each device. (default: 32)" in out
    assert "{fifo,firo,reservoir}" in out and "--no_save_at_end" in out
    assert "Learning rate. (default: 0.001)" in out and "--config" in out


@pytest.mark.e2e
def test_subprocess_command_line(tmp_path: Path) -> None:
    """A script reads sys.argv, as under `accelerate launch train.py --batch_size 64 ...`."""
    package_dir = Path(arguments_module.__file__).parent
    script = textwrap.dedent(
        f"""
        import dataclasses, sys, types
        # Only these two modules are under test: skip the package __init__ (it imports
        # torch, seconds of start-up that this test does not need).
        package = types.ModuleType("melissa_trainer")
        package.__path__ = [{str(package_dir)!r}]
        sys.modules["melissa_trainer"] = package
        from melissa_trainer.config.parser import ArgumentParser
        from melissa_trainer.config.arguments import TrainingArguments

        @dataclasses.dataclass
        class MyArgs:
            lr: float = 1e-3

        targs, my = ArgumentParser(TrainingArguments, MyArgs).parse_args_into_dataclasses()
        print(targs.batch_size, targs.buffer, my.lr)
        """
    )

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", script, *argv]
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=60)

    result = run("--batch_size", "64", "--buffer", "reservoir")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["64", "reservoir", "0.001"]
    result = run("--bufer", "reservoir")
    assert result.returncode == 2
    assert "unrecognized arguments: --bufer" in result.stderr
    assert "did you mean --buffer?" in result.stderr
