"""A Melissa key given as a flag, a `--config` key or an argument is told what replaces it.

htrial48 ported a Melissa study's dl_config into a `--config` file: `nb_batches_update`
and `checkpoint_interval` were refused with "remove it" and the list of every valid key,
`--per_server_watermark 20` with argparse's bare "unrecognized arguments"; nothing named
`eval_steps` or `save_steps`. `config.melissa_names` names them, as `hf_names` does for
Hugging Face's names.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from melissa_trainer import ArgumentParser, TrainingArguments
from melissa_trainer.config.melissa_names import MELISSA_ARGUMENTS
from melissa_trainer.config.reading import ConfigError, UnknownArgumentError

pytestmark = pytest.mark.timeout(60)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "configuration.md"


@pytest.mark.parametrize("name", sorted(MELISSA_ARGUMENTS))
def test_a_melissa_flag_is_told_what_replaces_it(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses([f"--{name}", "1"])
    assert raised.value.code == 2
    field, _ = MELISSA_ARGUMENTS[name]
    said = "Melissa's name: use --" + field if field else "Melissa's name, none here"
    assert f"--{name} ({said}" in capsys.readouterr().err


def test_a_config_key_and_an_argument_are_told_too() -> None:
    with pytest.raises(ConfigError, match="'nb_batches_update': Melissa's name: use 'eval_steps'"):
        ArgumentParser(TrainingArguments).parse_dict({"nb_batches_update": 100})
    with pytest.raises(UnknownArgumentError, match="Melissa's name: use 'watermark'"):
        TrainingArguments(per_server_watermark=20)  # type: ignore[call-arg]


def test_every_replacement_is_a_field_and_every_key_is_in_the_docs() -> None:
    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    section = PAGE.read_text().split("## From a Melissa study", 1)[1].split("\n## ", 1)[0]
    for name, (field, _) in MELISSA_ARGUMENTS.items():
        assert field is None or field in fields, name
        assert name in section, f"{name} is not in the docs' Melissa table"


def test_a_config_files_melissa_key_is_named_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file's line said "key 'per_server_watermark': unknown key
    'per_server_watermark': ..." (hmelissa2): one line, the name once, its replacement."""
    path = tmp_path / "run.yaml"
    path.write_text("per_server_watermark: 10\n")
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--config", str(path)])
    assert raised.value.code == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    assert line.endswith(
        f"error: in --config {path}, unknown key 'per_server_watermark': Melissa's name: use "
        "'watermark' (per rank, as Melissa's; docs/how-to/configuration.md, 'From a Melissa "
        "study')"
    )
    assert line.count("per_server_watermark") == 1
