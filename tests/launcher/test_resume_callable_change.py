"""A resume whose callable simulation kept its name but changed its code is warned
about as a changed command is (`study_change.program_change`, `program_code`): the
launcher records a digest of the callable's code with its name. Before (hcpar) only
``callable MODULE.NAME`` was recorded: a solver function edited between the run and its
resume (``steps = 30`` after 40) resumed without a word, the study mixing both."""

from __future__ import annotations

import functools
import importlib
import json
import linecache
import logging
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.launcher import Launcher, make_sampler
from melissa_trainer.launcher.program_code import code_digest
from melissa_trainer.launcher.study_change import program_change, program_of

MODULE = "hcpar_solver_for_resume"
SOLVER = '''
def solve(simulation_id, parameters):
    """A solver a user edits between a run and its resume."""
    steps = {steps}
    return steps * parameters["x"]
'''


@pytest.fixture
def solver_file(tmp_path: Path) -> Iterator[Callable[[int], Callable[..., object]]]:
    """`write(steps)`: the module MODULE written with `steps` and imported afresh (as a
    resumed process imports the file as it is then); its `solve`."""
    path = tmp_path / f"{MODULE}.py"
    sys.path.insert(0, str(tmp_path))

    def write(steps: int) -> Callable[..., object]:
        path.write_text(SOLVER.format(steps=steps))
        sys.modules.pop(MODULE, None)
        linecache.checkcache(str(path))
        importlib.invalidate_caches()
        solve: Callable[..., object] = importlib.import_module(MODULE).solve
        return solve

    try:
        yield write
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(MODULE, None)


def _launcher(simulation: Callable[..., object]) -> Launcher:
    return Launcher(simulation, make_sampler("sobol", {"x": (0, 1)}, seed=4), 4)


def _state(launcher: Launcher) -> dict[str, Any]:
    return json.loads(json.dumps(launcher.state_dict()))  # (as a checkpoint holds it)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.timeout(60)
def test_a_callable_whose_code_changed_is_warned_about(
    solver_file: Callable[[int], Callable[..., object]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = _state(_launcher(solver_file(40)))
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    _launcher(solver_file(30)).load_state_dict(state)
    said = _warnings(caplog)
    assert len(said) == 1, said
    assert f"the code of the simulation callable {MODULE}.solve changed" in said[0], said
    assert "made with the old one" in said[0]


@pytest.mark.timeout(60)
def test_the_same_code_or_an_old_state_without_its_digest_says_nothing(
    solver_file: Callable[[int], Callable[..., object]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = _state(_launcher(solver_file(40)))
    assert isinstance(state["program"]["code"], str)
    old = json.loads(json.dumps(state))
    del old["program"]["code"]  # (saved before the digest was recorded)
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    _launcher(solver_file(40)).load_state_dict(state)  # the file read again, unchanged
    _launcher(solver_file(30)).load_state_dict(old)
    assert _warnings(caplog) == []


class Solver:
    """A callable instance: its class's code is digested."""

    def __call__(self, simulation_id: int, parameters: dict[str, float]) -> None:
        return None


def _hidden(simulation_id: int, parameters: dict[str, float]) -> float:
    return 40 * parameters["x"]


def test_what_is_digested_and_what_has_no_code() -> None:
    hidden = code_digest(_hidden)
    assert hidden is not None and hidden == code_digest(_hidden)
    assert code_digest(functools.partial(_hidden, 3)) == hidden  # (its function's)
    assert code_digest(Solver()) == code_digest(Solver) is not None
    assert code_digest(lambda s, p: None) is not None  # (its line)
    assert code_digest(math.sqrt) is None  # a builtin: no source, no code object
    assert code_digest(len) is None
    for no_source in ("def f(s, p):\n    return 40\n", "def f(s, p):\n    return 30\n"):
        namespace: dict[str, Any] = {}
        exec(compile(no_source, "<typed in>", "exec"), namespace)  # (no file to read)
        digest = code_digest(namespace["f"])  # its code object's: 40 and 30 differ
        assert digest is not None and digest != hidden
        hidden = digest
    builtin = program_of(math.sqrt, {})
    assert builtin["command"] == ["callable math.sqrt"] and builtin["code"] is None
    assert program_change(builtin, builtin, 2) is None  # (nothing compared)
    lam = program_of(lambda s, p: None, {})
    assert program_change(lam, lam, 2) is None
