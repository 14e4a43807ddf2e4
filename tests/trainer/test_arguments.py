"""TrainingArguments validation and the dataclass ArgumentParser."""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal, Optional

import pytest

import melissa_trainer.config.arguments as arguments_module
from melissa_trainer.buffers import BufferConfig
from melissa_trainer.buffers.config import DEFAULT_SAMPLE_TO_INSERT_RATIO as DEFAULT_RATIO
from melissa_trainer.config.arguments import ConfigError, TrainingArguments, load_config_file
from melissa_trainer.config.parser import ArgumentParser


def config_error(**kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        TrainingArguments(**kwargs)  # type: ignore[arg-type]
    return info.value


# ---------------------------------------------------------------------- TrainingArguments


def test_defaults_are_valid() -> None:
    args = TrainingArguments()
    assert args.batch_size == 32 and args.buffer == "reservoir" and args.max_steps is None
    assert args.resolved_logging_dir == os.path.join("outputs", "runs")
    assert TrainingArguments(logging_dir="tb").resolved_logging_dir == "tb"
    config = args.buffer_config()
    assert (config.watermark, config.capacity, config.sample_to_insert_ratio) == (1, 10_000, 16.0)
    # max(4 * 32, 16 * 1 + 32, 16 * (32 - 1))
    assert config.resolved_tolerance == 496.0
    assert issubclass(ConfigError, ValueError)


def test_the_defaults_train_each_sample_several_times() -> None:
    """Issue 30: a reservoir with a sample-to-insert ratio by default (FIFO trained on
    each sample once), the defaults of `TrainingArguments` and `BufferConfig` one."""
    config = TrainingArguments().buffer_config()
    assert (config.kind, config.sample_to_insert_ratio) == ("reservoir", DEFAULT_RATIO)
    assert DEFAULT_RATIO == 16.0
    plain = BufferConfig()
    assert (plain.kind, plain.capacity, plain.watermark) == (
        config.kind, config.capacity, config.watermark
    )  # fmt: skip
    # FIFO / FIRO get no ratio; 0 turns a reservoir's off; a ratio given is kept
    for kind in ("fifo", "firo"):
        assert TrainingArguments(buffer=kind).buffer_config().sample_to_insert_ratio is None
        assert TrainingArguments(buffer=kind, sample_to_insert_ratio=0).buffer_config(
        ).sample_to_insert_ratio is None  # fmt: skip
    off = TrainingArguments(sample_to_insert_ratio=0).buffer_config()
    assert off.sample_to_insert_ratio is None and off.resolved_tolerance is None
    assert TrainingArguments(sample_to_insert_ratio=4).buffer_config().sample_to_insert_ratio == 4
    # the default never exceeds max_sample_reuse (a ratio above it is an error)
    assert TrainingArguments(max_sample_reuse=3).buffer_config().sample_to_insert_ratio == 3.0
    assert TrainingArguments(max_sample_reuse=64).buffer_config().sample_to_insert_ratio == 16.0
    # the unset ratio is kept unset: a configuration file written from it stays portable
    assert TrainingArguments().to_dict()["sample_to_insert_ratio"] is None


def test_every_field_is_documented() -> None:
    doc = TrainingArguments.__doc__ or ""
    for f in dataclasses.fields(TrainingArguments):
        assert f.metadata.get("help"), f.name
        assert f"{f.name}:" in doc, f.name


@pytest.mark.parametrize(
    "name",
    [
        "batch_size",
        "gradient_accumulation_steps",
        "logging_steps",
        "buffer_size",
        "stop_sync_steps",
        "max_to_keep",
        "pseudo_epochs",
        "watermark",
    ],
)
@pytest.mark.parametrize("value", [0, -3])
def test_non_positive_values(name: str, value: int) -> None:
    err = config_error(**{name: value})
    assert f"{name}={value}" in str(err)
    assert f"set {name} >= 1" in str(err)
    assert len(err.problems) == 1


@pytest.mark.parametrize(
    "name", ["max_steps", "eval_steps", "save_steps", "early_stopping_patience"]
)
def test_optional_steps_must_be_positive_when_set(name: str) -> None:
    err = config_error(**{name: 0})
    assert f"{name}=0" in str(err) and "leave it unset (None)" in str(err)
    assert getattr(TrainingArguments(**{name: 5}), name) == 5  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "value", "choices"),
    [
        ("buffer", "lifo", "fifo, firo, reservoir"),
        ("mixed_precision", "fp8", "no, fp16, bf16"),
        ("report_to", "wandb", "tensorboard, none"),
    ],
)
def test_unknown_choices_list_the_valid_ones(name: str, value: str, choices: str) -> None:
    err = config_error(**{name: value})
    assert f"{name}={value!r}" in str(err) and choices in str(err)


def test_choices_are_normalised_to_lower_case() -> None:
    args = TrainingArguments(buffer=" Reservoir", mixed_precision="BF16", report_to="None")
    assert (args.buffer, args.mixed_precision, args.report_to) == ("reservoir", "bf16", "none")


def test_watermark_and_batch_size_against_buffer_size() -> None:
    err = config_error(watermark=200, buffer_size=100, batch_size=8)
    assert str(err).endswith(
        "watermark=200 is larger than buffer_size=100: lower watermark or raise buffer_size"
    )
    err = config_error(batch_size=128, buffer_size=100)
    assert "batch_size=128 is larger than buffer_size=100" in str(err)
    assert "lower batch_size or raise buffer_size" in str(err)
    TrainingArguments(watermark=100, buffer_size=100, batch_size=100)  # equal is fine


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_sample_reuse", 2), ("sample_to_insert_ratio", 1.0), ("sample_to_insert_tolerance", 9.0)],
)
@pytest.mark.parametrize("buffer", ["fifo", "firo"])
def test_reservoir_only_options(name: str, value: float, buffer: str) -> None:
    err = config_error(buffer=buffer, **{name: value})
    assert f"{name}={value!r} only applies to buffer='reservoir'" in str(err)
    assert "set buffer='reservoir'" in str(err)
    assert f"{name}=None (on a command line: --{name} None)" in str(err)  # the fix, exactly


def test_reservoir_options_and_resolved_tolerance() -> None:
    args = TrainingArguments(
        buffer="reservoir", max_sample_reuse=3, sample_to_insert_ratio=2.0, watermark=100
    )
    # max(4 * 32 * 1, 2.0 * 100 + 32)
    assert args.buffer_config().resolved_tolerance == 232.0
    args = TrainingArguments(buffer="reservoir", sample_to_insert_ratio=1.0, batch_size=8,
                             gradient_accumulation_steps=4)  # fmt: skip
    assert args.buffer_config().resolved_tolerance == 128.0
    args = TrainingArguments(
        buffer="reservoir", sample_to_insert_ratio=1.0, sample_to_insert_tolerance=33
    )
    assert args.buffer_config().resolved_tolerance == 33.0
    # pseudo-epochs with a reservoir are allowed (it replays its retained subset)
    assert TrainingArguments(buffer="reservoir", pseudo_epochs=3).pseudo_epochs == 3


def test_ratio_and_tolerance_errors() -> None:
    for ratio in (-1e-3, -1.5):
        err = config_error(buffer="reservoir", sample_to_insert_ratio=ratio)
        assert f"sample_to_insert_ratio={float(ratio)!r} must be >= 0" in str(err)
        assert "0 for no rate limit" in str(err)
    err = config_error(
        buffer="reservoir", sample_to_insert_ratio=2.0, sample_to_insert_tolerance=10
    )
    assert "sample_to_insert_tolerance=10.0 is too small" in str(err)
    # batch 32 and watermark 1: the first read needs 2 * (32 - 1) = 62 > 2 + 32
    assert ">= max(ratio + batch_size, ratio * (batch_size - watermark)) = 62" in str(err)
    err = config_error(buffer="reservoir", sample_to_insert_ratio=2.0, watermark=32,
                       buffer_size=64, sample_to_insert_tolerance=10)  # fmt: skip
    assert "= 34, raise watermark" in str(err)
    err = config_error(buffer="reservoir", sample_to_insert_ratio=0, sample_to_insert_tolerance=50)
    assert "has no effect without sample_to_insert_ratio" in str(err)
    # unset, the reservoir's default ratio is there for the tolerance to apply to
    tolerant = TrainingArguments(sample_to_insert_tolerance=600)
    assert tolerant.buffer_config().resolved_tolerance == 600.0
    err = config_error(buffer="reservoir", sample_to_insert_ratio=3, max_sample_reuse=2)
    assert "sample_to_insert_ratio=3.0 is larger than max_sample_reuse=2" in str(err)
    assert "raise max_sample_reuse" in str(err)
    err = config_error(buffer="reservoir", max_sample_reuse=0)
    assert "max_sample_reuse=0 must be a positive integer" in str(err)


def test_misc_checks() -> None:
    assert "seed=-1" in str(config_error(seed=-1))
    assert "output_dir=''" in str(config_error(output_dir=""))
    assert "metric_for_best_model" in str(config_error(metric_for_best_model=" "))
    assert "resume_from_checkpoint=''" in str(config_error(resume_from_checkpoint=""))
    assert TrainingArguments(early_stopping_patience=2).early_stopping_patience == 2


def test_a_resume_path_that_does_not_exist_is_refused_at_once(tmp_path: Path) -> None:
    """A typo in --resume_from_checkpoint ('lates', a wrong step) is a ConfigError when the
    arguments are made, naming the field and the fix: it was a FileNotFoundError traceback
    from `train()`, after the model, the validation set and the trainer were built (the
    user trial of the Navier-Stokes example)."""
    err = str(config_error(resume_from_checkpoint="lates", output_dir=str(tmp_path / "out")))
    assert "resume_from_checkpoint='lates' is not a directory (did you mean 'latest'?)" in err
    assert "give 'latest'" in err and os.path.join(str(tmp_path / "out"), "checkpoints") in err
    missing = str(tmp_path / "out" / "checkpoints" / "checkpoint-40")
    err = str(config_error(resume_from_checkpoint=missing))
    assert f"resume_from_checkpoint={missing!r} is not a directory: give" in err
    assert "did you mean" not in err
    (tmp_path / "file").write_text("x")
    assert "is not a directory" in str(config_error(resume_from_checkpoint=str(tmp_path / "file")))
    # 'latest' needs no checkpoint yet (a job script's first run); a directory is taken
    assert TrainingArguments(resume_from_checkpoint="latest").resume_from_checkpoint == "latest"
    there = str(tmp_path / "out")
    os.makedirs(there)
    assert TrainingArguments(resume_from_checkpoint=there).resume_from_checkpoint == there


def test_a_file_where_a_directory_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("not a directory")
    err = str(config_error(output_dir=str(tmp_path / "f")))
    assert f"output_dir={str(tmp_path / 'f')!r} is a file, not a directory" in err
    assert "give a directory path" in err
    err = str(config_error(logging_dir=str(tmp_path / "f" / "runs")))
    assert f"is inside {str(tmp_path / 'f')!r}, a file" in err
    # a directory that exists, or that can be made, is fine
    assert TrainingArguments(output_dir=str(tmp_path)).output_dir == str(tmp_path)
    assert TrainingArguments(output_dir=str(tmp_path / "new" / "sub")).output_dir


def test_all_problems_are_reported_together() -> None:
    err = config_error(
        batch_size="abc", buffer="lifo", watermark=200, buffer_size=100, logging_steps=0
    )
    assert len(err.problems) == 4
    lines = str(err).splitlines()
    assert lines[0] == "invalid TrainingArguments (4 problems):"
    assert len(lines) == 5
    assert any("batch_size='abc' is not an integer" in line for line in lines)
    assert any("buffer='lifo'" in line for line in lines)
    assert any("watermark=200" in line for line in lines)
    assert any("logging_steps=0" in line for line in lines)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("batch_size", "abc", "is not an integer"),
        ("batch_size", True, "is not an integer"),
        ("batch_size", 3.5, "is not an integer"),
        ("batch_size", None, "must not be null"),
        ("save_at_end", "maybe", "is not a boolean"),
        ("sample_to_insert_ratio", "fast", "is not a number"),
        ("buffer", ["fifo"], "is not a string"),
        ("report_to", True, "is a boolean, not a string: quote it"),
    ],
)
def test_wrong_types_name_the_field(name: str, value: object, message: str) -> None:
    err = config_error(**{name: value})
    assert f"{name}={value!r} {message}" in str(err)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(TrainingArguments)])
def test_every_field_of_the_wrong_type_is_a_config_error_naming_it(field: str) -> None:
    """A value no field can take (a list) is one problem naming the field, whichever
    field: never a bare error from a rule that reads it (``pseudo_epochs=[2]`` was a
    TypeError from comparing a list with 1, made into the buffer's ``retain``)."""
    err = config_error(**{field: [2]})
    assert len(err.problems) == 1, err.problems
    assert err.problems[0].startswith(f"{field}=[2] is not {_KIND[field]}"), err.problems


#: what the conversion of a list to each field's type says it is not
_KIND = {
    f.name: (
        "a boolean"
        if "bool" in str(f.type)
        else "an integer"
        if "int" in str(f.type)
        else "a number"
        if "float" in str(f.type)
        else "a string"
    )
    for f in dataclasses.fields(TrainingArguments)
}


def test_values_from_files_are_converted() -> None:
    args = TrainingArguments.from_dict(
        {"batch_size": "64", "buffer_size": 1e4, "save_at_end": "false",
         "buffer": "reservoir", "sample_to_insert_ratio": "1e-1", "mixed_precision": False}
    )  # fmt: skip
    assert args.batch_size == 64 and args.buffer_size == 10_000 and args.save_at_end is False
    assert args.sample_to_insert_ratio == 0.1 and args.mixed_precision == "no"


def test_unknown_keys_suggest_the_closest_name() -> None:
    with pytest.raises(ConfigError) as info:
        TrainingArguments.from_dict({"batchsize": 3, "bufer": "fifo", "zzz": 1})
    text = str(info.value)
    assert "unknown key 'batchsize': did you mean 'batch_size'?" in text
    assert "unknown key 'bufer': did you mean 'buffer'?" in text
    assert "unknown key 'zzz': remove it (valid keys:" in text


def test_unknown_keyword_arguments_suggest_the_closest_name() -> None:
    # a TypeError as for any unexpected keyword (code catching it keeps working),
    # naming the field meant rather than Python's bare "unexpected keyword argument"
    with pytest.raises(TypeError) as info:
        TrainingArguments(output_dir="o", watermak=10)  # type: ignore[call-arg]
    assert isinstance(info.value, ConfigError)
    assert "unknown argument 'watermak': did you mean 'watermark'?" in str(info.value)

    @dataclasses.dataclass
    class MyArguments(TrainingArguments):  # a user's subclass with its own field
        learning_rate: float = 1e-3

    assert MyArguments(output_dir="o", learning_rate=0.1, seed=3).learning_rate == 0.1
    with pytest.raises(TypeError, match="'lerning_rate': did you mean 'learning_rate'"):
        MyArguments(output_dir="o", lerning_rate=0.1)  # type: ignore[call-arg]
    args = TrainingArguments(output_dir="o", seed=5)  # replace/copy still build instances
    assert dataclasses.replace(args, seed=6).seed == 6 and copy.deepcopy(args) == args


def test_round_trip() -> None:
    args = TrainingArguments(
        output_dir="o", batch_size=8, buffer="reservoir", sample_to_insert_ratio=0.5,
        max_steps=100, eval_steps=10, save_at_end=False, early_stopping_patience=2,
    )  # fmt: skip
    assert TrainingArguments.from_dict(args.to_dict()) == args
    assert TrainingArguments.from_dict(json.loads(args.to_json())) == args


def test_from_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps({"batch_size": 4, "buffer": "firo"}))
    (tmp_path / "a.yaml").write_text("batch_size: 4\nbuffer: firo\nmixed_precision: no\n")
    (tmp_path / "empty.yml").write_text("")
    (tmp_path / "a.toml").write_text("")
    (tmp_path / "list.yaml").write_text("- 1\n")
    (tmp_path / "bad.json").write_text("{")
    for name in ("a.json", "a.yaml"):
        args = TrainingArguments.from_file(tmp_path / name)
        assert (args.batch_size, args.buffer, args.mixed_precision) == (4, "firo", "no")
    assert TrainingArguments.from_file(tmp_path / "empty.yml") == TrainingArguments()
    for name, message in [
        ("a.toml", "unsupported extension '.toml'"),
        ("list.yaml", "not a mapping"),
        ("bad.json", "not valid JSON"),
        ("missing.json", "does not exist"),
    ]:
        with pytest.raises(ConfigError, match=message):
            TrainingArguments.from_file(tmp_path / name)


# ---------------------------------------------------------------------- ArgumentParser


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
    assert f"in --config {path}, key 'bufer': unknown key 'bufer': did you mean 'buffer'?" in err
    path.write_text("batch_size: 0\n")
    with pytest.raises(SystemExit):
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
    with pytest.raises(SystemExit):
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
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses([])
    assert "required: --width" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="width is required"):
        parser.parse_dict({})
    with pytest.raises(ValueError, match="defined by both"):
        ArgumentParser(TrainingArguments, TrainingArguments)
    with pytest.raises(TypeError, match="not a dataclass"):
        ArgumentParser(int)


def test_help_mentions_fields(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
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


def test_load_config_file_format_override(tmp_path: Path) -> None:
    path = tmp_path / "conf.txt"
    path.write_text("seed: 5\n")
    assert load_config_file(path, fmt="yaml") == {"seed": 5}


def test_on_save_error_is_checked_early() -> None:
    assert TrainingArguments().on_save_error == "stop"
    assert TrainingArguments(on_save_error="Continue").on_save_error == "continue"
    with pytest.raises(
        ConfigError, match="on_save_error='ignore' is not supported: choose one of stop, continue"
    ):
        TrainingArguments(on_save_error="ignore")


def test_draw_choices_reach_the_buffer_and_are_checked() -> None:
    assert TrainingArguments().buffer_config().draw_choices == 1  # uniform draws
    assert TrainingArguments(draw_choices=2).buffer_config().draw_choices == 2
    assert "draw_choices=0 must be a positive integer" in str(config_error(draw_choices=0))
    err = config_error(buffer="fifo", draw_choices=2)
    assert "draw_choices=2 only applies to buffer='reservoir'" in str(err)
    assert "or draw_choices=1" in str(err)
