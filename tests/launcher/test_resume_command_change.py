"""A resume with another simulation command or `env` (htrial28 finding 2): the launcher
records what its jobs run in its state and, on resume, warns naming the change and what
it means (`study_change.program_change`); an old state without the record loads with no
warning. Before: a resume with ``--time_steps 30`` after 40 was accepted without a word.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.launcher.study_change import program_change, program_of

SOLVER = "python heat.py --id {simulation_id} --x {x} --time_steps {steps} --dt 0.001"


def _launcher(steps: int = 40, env: dict[str, str] | None = None) -> Launcher:
    command = SOLVER.replace("{steps}", str(steps))
    return Launcher(command, make_sampler("sobol", {"x": (0, 1)}, seed=4), 4, env=env)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def _state(launcher: Launcher) -> dict[str, Any]:
    return json.loads(json.dumps(launcher.state_dict()))  # (as a checkpoint holds it)


@pytest.mark.timeout(60)
def test_a_changed_command_is_warned_about_naming_old_and_new(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = _state(_launcher(40))
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    _launcher(30).load_state_dict(state)
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert "the simulation command changed: --time_steps 40 -> --time_steps 30" in said[0]
    assert "those still to run use the new one" in said[0]
    assert "made with the old one" in said[0]


@pytest.mark.timeout(60)
def test_the_same_command_or_an_old_state_without_it_says_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = _state(_launcher(40))
    old = {k: v for k, v in state.items() if k != "program"}  # saved before the record
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    _launcher(40).load_state_dict(state)
    _launcher(30).load_state_dict(old)
    assert _warnings(caplog) == []


@pytest.mark.timeout(60)
def test_a_changed_env_is_named_without_its_values(caplog: pytest.LogCaptureFixture) -> None:
    state = _state(_launcher(env={"OMP_NUM_THREADS": "1", "TOKEN": "s3cret"}))
    assert "s3cret" not in json.dumps(state)  # (a digest: no secret in the checkpoint)
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    _launcher(env={"OMP_NUM_THREADS": "2", "NEW": "x"}).load_state_dict(state)
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert "env changed (added NEW; removed TOKEN; changed OMP_NUM_THREADS)" in said[0]


def test_the_warning_counts_the_finished_simulations_and_names_each_change() -> None:
    old = program_of("solve --time_steps 40 --dt 0.001 --out x", {})
    new = program_of("solve --time_steps 30 --dt 0.004 --out x", {})
    said = program_change(old, new, 3)
    assert said is not None
    assert "--time_steps 40 --dt 0.001 -> --time_steps 30 --dt 0.004" in said
    assert "the 3 simulations finished so far were made with the old one" in said
    assert program_change(old, old, 3) is None
    assert program_change(None, new, 3) is None
    callable_program = program_of(_launcher, {})
    assert callable_program["command"] == [f"callable {__name__}._launcher"]


@pytest.mark.timeout(60)
def test_python_and_python3_of_one_environment_are_one_command(tmp_path: Path) -> None:
    """`python train.py` and `accelerate launch train.py` give `sys.executable` as
    ``VENV/bin/python`` and ``VENV/bin/python3`` (the accelerate script's shebang): one
    interpreter of one environment, so no warning on a resize between them (htrial45:
    the heat example resumed 2 ranks -> 1 warned 'the simulation command changed:
    .../python3 -> .../python ... the study mixes both'). A name in another directory
    that resolves to the same file is another environment (a venv's python is a link to
    its base interpreter): still warned."""
    venv, base = tmp_path / "venv" / "bin", tmp_path / "base"
    venv.mkdir(parents=True)
    base.mkdir()
    (base / "python3.11").write_text("#!/bin/sh\n")
    (venv / "python3").symlink_to(base / "python3.11")
    (venv / "python").symlink_to("python3")
    solver = ["solver.py", "--steps", "40"]
    launched = program_of([str(venv / "python3"), *solver], {})
    plain = program_of([str(venv / "python"), *solver], {})
    assert program_change(launched, plain, 11) is None
    said = program_change(launched, program_of([str(base / "python3.11"), *solver], {}), 11)
    assert said is not None and "python3.11" in said, said
    gone = program_of([str(venv / "python9"), *solver], {})  # (no such file: compared as words)
    assert program_change(launched, gone, 11) is not None


def test_a_flag_added_or_removed_is_named_so_not_as_the_value_before_it() -> None:
    # (a trial resumed the heat example with --worker added: the warning read
    # "1 -> 1 --worker", the value of the flag before it on both sides)
    plain = program_of("solve --time_steps 40 --dt 1", {})
    worker = program_of("solve --time_steps 40 --dt 1 --worker", {})
    middle = program_of("solve --time_steps 40 --worker --dt 1", {})
    said = program_change(plain, worker, 2)
    assert said is not None and "the simulation command changed: --worker added" in said, said
    said = program_change(worker, plain, 2)
    assert said is not None and "the simulation command changed: --worker removed" in said, said
    said = program_change(plain, middle, 2)
    assert said is not None and "the simulation command changed: --worker added" in said, said
    said = program_change(plain, program_of("solve --time_steps 40 --dt 2", {}), 2)
    assert said is not None and "changed: --dt 1 -> --dt 2" in said, said  # (as before)
