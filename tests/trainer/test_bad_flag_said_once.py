"""A bad command-line flag under two real ranks (`accelerate launch --multi_gpu
--num_processes 2`, gloo on CPU) is said once: rank 0 prints argparse's error, rank 1
exits with the same status 2 without printing it again (`config.parser.ArgumentParser.
error`, through `common.refusal`, the mechanism of a refused start). The oracle: the
error's text counted in the launch's whole output (two before the fix, one per rank),
and each rank's own record of the `SystemExit` it caught and its code. ``--help`` is
said once the same way, every rank exiting 0.

What is checked against files (a ``--config`` file) may differ between nodes: every
rank still says its own (in-process tests, the launcher's rank in the environment)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from two_ranks import launch_two_ranks

from melissa_trainer import ArgumentParser, TrainingArguments
from melissa_trainer.common.refusal import SaidOnRankZero

SCRIPT = Path(__file__).parents[1] / "scripts" / "bad_flag.py"
SAID = "unrecognized arguments: --batch_sizee 4"
HELP_LINE = "show this help message and exit"  # --help's own line in the help text


def launch_bad_flag(tmp_path: Path, *flags: str) -> tuple[str, list[dict[str, Any]]]:
    """tests/scripts/bad_flag.py on two ranks (`two_ranks.launch_two_ranks`) with `flags`:
    the launch's whole output (stdout and stderr) and what each rank caught (its
    caught_R.json)."""
    proc = launch_two_ranks(
        SCRIPT, "--output_dir", str(tmp_path / "out"), *flags, env={"BAD_FLAG_DIR": str(tmp_path)}
    )
    output = proc.stdout + proc.stderr
    caught = []
    for rank in range(2):
        record = tmp_path / f"caught_{rank}.json"
        assert record.exists(), f"rank {rank} recorded nothing:\n{output[-3000:]}"
        caught.append(json.loads(record.read_text()))
    return output, caught


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_a_bad_flag_on_two_ranks_is_said_once_and_both_exit_2(tmp_path: Path) -> None:
    output, caught = launch_bad_flag(tmp_path, "--batch_sizee", "4")
    # every rank met the error and ends with argparse's status ...
    assert caught == [{"class": "SystemExit", "code": 2}] * 2, caught
    # ... and it is printed once, by rank 0, with its usage line and its hint
    assert output.count(SAID) == 1, output[-6000:]
    assert output.count("usage: bad_flag.py") == 1, output[-6000:]
    assert "did you mean --batch_size?" in output


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_help_on_two_ranks_is_printed_once_and_both_exit_0(tmp_path: Path) -> None:
    """Every rank parses ``--help``; the help text is printed by rank 0 only (twice before
    the fix, once per rank), and both ranks end with argparse's status 0."""
    output, caught = launch_bad_flag(tmp_path, "--help")
    assert caught == [{"class": "SystemExit", "code": 0}] * 2, caught
    assert output.count("usage: bad_flag.py") == 1, output[-6000:]
    assert output.count(HELP_LINE) == 1, output[-6000:]


def test_a_rank_other_than_0_exits_2_silently(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--batch_sizee", "4"])
    assert raised.value.code == 2 and isinstance(raised.value, SaidOnRankZero)
    assert capsys.readouterr().err == ""


def test_help_on_a_rank_other_than_0_exits_0_silently(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--help"])
    assert raised.value.code == 0 and isinstance(raised.value, SaidOnRankZero)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("rank", ["0", ""])
def test_rank_0_or_no_launcher_says_the_error(
    rank: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    if rank:
        monkeypatch.setenv("RANK", rank)
    with pytest.raises(SystemExit) as raised:
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--batch_sizee", "4"])
    assert raised.value.code == 2 and not isinstance(raised.value, SaidOnRankZero)
    assert SAID in capsys.readouterr().err


def test_a_config_file_error_is_said_by_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file may differ between nodes (or be missing on one): no rank keeps silent."""
    monkeypatch.setenv("RANK", "1")
    missing = tmp_path / "run.yaml"
    parser = ArgumentParser(TrainingArguments)
    with pytest.raises(SystemExit) as raised:
        parser.parse_args_into_dataclasses(["--output_dir", "o", "--config", str(missing)])
    assert raised.value.code == 2 and not isinstance(raised.value, SaidOnRankZero)
    assert "argument --config" in capsys.readouterr().err
