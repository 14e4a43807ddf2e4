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


def _own_flags_error(*argv: str, capsys: pytest.CaptureFixture[str]) -> str:
    parser = ArgumentParser(_Study)
    parser.add_argument("--mesh-size", type=int, default=8)  # a script's own: hyphens only
    parser.add_argument("--n_sims", type=int, default=8)  # and underscores only
    with pytest.raises(SystemExit) as info:
        parser.parse_args_into_dataclasses(list(argv))
    assert info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("--mesh_sise", "--mesh-size"), ("--n-sim", "--n_sims"), ("--mesh-sise", "--mesh-size")],
)
def test_a_scripts_own_flag_is_hinted_as_it_is_spelt(
    typo: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # (the hint re-hyphenated a name when the typo had a hyphen, or kept underscores,
    # naming --n-sims or --mesh_size: flags the parser then refused, hrev3)
    err = _own_flags_error(typo, "3", capsys=capsys)
    assert f"{typo} (did you mean {meant}?)" in err, err
    parser = ArgumentParser(_Study)
    parser.add_argument("--mesh-size", type=int, default=8)
    parser.add_argument("--n_sims", type=int, default=8)
    study, own = parser.parse_args_into_dataclasses([meant, "3"])  # (the hint parses)
    assert 3 in (own.mesh_size, own.n_sims) and study == _Study()


def test_a_scripts_own_flags_come_back_in_a_namespace_as_hf_returns_them() -> None:
    # (they were refused as unknown keys of the dataclasses: HfArgumentParser returns
    # them after the dataclasses, and a port of an HF script added its own this way)
    parser = ArgumentParser(_Study)
    parser.add_argument("--mesh-size", type=int, default=8)
    study, own = parser.parse_args_into_dataclasses(["--job_limit", "2", "--mesh-size", "5"])
    assert study == _Study(job_limit=2) and vars(own) == {"mesh_size": 5}
    study, own, rest = parser.parse_args_into_dataclasses(["--zz"], return_remaining_strings=True)
    assert study == _Study() and vars(own) == {"mesh_size": 8} and rest == ["--zz"]
    (alone,) = ArgumentParser(_Study).parse_args_into_dataclasses([])  # (none: no Namespace)
    assert alone == _Study()
