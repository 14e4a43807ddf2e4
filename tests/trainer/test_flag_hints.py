"""The command line's hint for an unknown flag (`ArgumentParser`): a near miss of a known
flag is named, a flag merely sharing letters with one is not (heat_c's ``--no_plot``
was answered "did you mean --job_limit?")."""

from __future__ import annotations

import dataclasses

import pytest

from melissa_trainer.config.parser import ArgumentParser


@dataclasses.dataclass
class _Study:
    job_limit: int = 4
    grid_size: int = 8


def _error(*argv: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        ArgumentParser(_Study).parse_args_into_dataclasses(list(argv))
    assert info.value.code == 2
    return capsys.readouterr().err


def test_an_unrelated_flag_gets_no_hint(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error("--no_plot", capsys=capsys)
    assert "unrecognized arguments: --no_plot" in err
    assert "did you mean" not in err


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("--job_limt", "--job_limit"), ("--gridsize", "--grid_size"), ("--job-limits", "--job-limit")],
)
def test_a_typo_is_named(typo: str, meant: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(typo, "3", capsys=capsys)
    assert f"unrecognized arguments: {typo} 3" in err
    assert f"{typo} (did you mean {meant}?)" in err


@pytest.mark.parametrize("path", ["args.json", "run.yaml", "conf/run.yml"])
def test_a_file_given_as_hf_does_names_config(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # HF examples read `python train.py args.json` (HfArgumentParser.parse_json_file); here a
    # file of arguments is `--config FILE`, which the bare "unrecognized arguments" did not say
    err = _error(path, capsys=capsys)
    assert f"unrecognized arguments: {path}" in err
    assert f"{path} (a file of arguments is given as --config {path})" in err


def test_a_stray_word_gets_no_config_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--config" not in _error("json", capsys=capsys).split("error:")[1]
