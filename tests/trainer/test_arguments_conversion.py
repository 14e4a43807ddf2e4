"""What `TrainingArguments` makes of what it is given: every problem reported together,
a value of the wrong type named with its field, values from files converted, unknown
keys and keyword arguments with the closest name suggested, a round trip through a dict
and JSON, configuration files (JSON, YAML; their errors)."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
from config_errors import config_error

from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.reading import ConfigError, load_config_file


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


def test_load_config_file_format_override(tmp_path: Path) -> None:
    path = tmp_path / "conf.txt"
    path.write_text("seed: 5\n")
    assert load_config_file(path, fmt="yaml") == {"seed": 5}
