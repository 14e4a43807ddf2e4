"""A typo of a Hugging Face name the script has no field for (``--learning_rat`` in a
script parsing `TrainingArguments` alone: the learning rate is the optimizer's here) is
told the name it misspells and what replaces it, on the command line and in a
``--config`` file (`config.hf_names.closest_hint`). A user trial met a 60-line usage and
``unrecognized arguments: --learning_rat 1e-3`` with no "did you mean", and ``unknown key
'learning_rat': remove it (valid keys: ...)``: learning_rate was in no list searched.

The oracle is the wording written out here; the command line runs a real script in a
subprocess, as a user does, and reads its last lines (after argparse's usage)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from melissa_trainer import ArgumentParser, TrainingArguments
from melissa_trainer.config.reading import ConfigError

ROOT = Path(__file__).parents[2]
OPTIMIZER = "set it in the optimizer or scheduler you pass to OnlineTrainer"


def _run_script(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """A train.py parsing TrainingArguments alone, run with `argv`."""
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            from melissa_trainer import ArgumentParser, TrainingArguments
            (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
            print("parsed", args.max_steps)
            """
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, str(script), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_typo_of_learning_rate_on_the_command_line(tmp_path: Path) -> None:
    proc = _run_script(tmp_path, "--output_dir", str(tmp_path / "out"), "--learning_rat", "1e-3")
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("train.py: error: unrecognized arguments: --learning_rat 1e-3"), last
    assert "--learning_rat (did you mean --learning_rate? Hugging Face's name, none here: " in last
    assert OPTIMIZER in last


@pytest.mark.timeout(60)
def test_a_typo_of_learning_rate_in_a_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ArgumentParser(TrainingArguments).parse_dict(
            {"output_dir": str(tmp_path), "learning_rat": 1e-3}
        )
    (problem,) = info.value.problems
    assert problem.startswith("unknown key 'learning_rat': did you mean 'learning_rate'? "), problem
    assert OPTIMIZER in problem
    assert "valid keys" not in problem


@pytest.mark.timeout(60)
def test_a_typo_of_learning_rate_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    # the same as the subprocess's, in the inner tier (-m "not e2e")
    with pytest.raises(SystemExit):
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--learning_rat", "1e-3"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--learning_rat (did you mean --learning_rate? Hugging Face's name, none here: " in last


@pytest.mark.timeout(60)
def test_a_typo_of_a_renamed_hf_flag_names_both(capsys: pytest.CaptureFixture[str]) -> None:
    # save_total_limit is max_to_keep here: its typo is told both names
    with pytest.raises(SystemExit):
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(["--save_total_limt", "2"])
    err = capsys.readouterr().err
    assert "(did you mean --save_total_limit? Hugging Face's name: use --max_to_keep)" in err


@pytest.mark.timeout(60)
def test_the_script_s_own_field_wins_over_the_hf_name(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Opts:
        learning_rate: float = 1e-3

    with pytest.raises(ConfigError) as info:
        ArgumentParser(TrainingArguments, Opts).parse_dict(
            {"output_dir": str(tmp_path), "learning_rat": 1e-3}
        )
    assert info.value.problems == ["unknown key 'learning_rat': did you mean 'learning_rate'?"]
