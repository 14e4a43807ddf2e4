"""The inner tier's cheap guards, in process (tests/project/test_tiers.py runs a pytest
suite, so it is end-to-end itself):

- every fixture named in tests/conftest.py's ``E2E_FIXTURES`` (those that start
  processes once for many tests) is defined, under that name, in tests/: a renamed one
  would leave its tests unmarked but the first;
- a bit-for-bit grid that the inner tier runs in part keeps every option set in it: the
  cases it leaves to the full suite (other seeds, the largest capacity) are marked
  ``e2e``, at least one is, and none is an option set the inner tier never runs.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

import pytest

TESTS = Path(__file__).resolve().parents[1]

#: the grids cut so: their module, under tests/, and the position of the option set in a
#: case's values (the other value: a seed, a capacity)
GRIDS = {
    "launcher/test_density_replay.py": 0,
    "launcher/test_density_memo.py": 0,
    "buffers/test_reservoir_bursts.py": 0,
}


def fixtures_defined(names: Iterable[str]) -> set[str]:
    """Those of `names` that are functions decorated ``@pytest.fixture`` (called or not)
    in a Python file under tests/ (only the files that say ``def NAME(`` are parsed)."""
    wanted = set(names)
    found = set()
    for path in TESTS.rglob("*.py"):
        text = path.read_text()
        if not any(f"def {name}(" in text for name in wanted):
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.FunctionDef)
                and node.name in wanted
                and any("fixture" in ast.unparse(d).split("(")[0] for d in node.decorator_list)
            ):
                found.add(node.name)
    return found


def e2e_fixtures() -> set[str]:
    """tests/conftest.py's ``E2E_FIXTURES``, read from its source (``import conftest``
    gives whichever conftest pytest imported last under that name: tests/stream's, say)."""
    for node in ast.parse((TESTS / "conftest.py").read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "E2E_FIXTURES":
            call = node.value
            assert isinstance(call, ast.Call) and ast.unparse(call.func) == "frozenset"
            return set(ast.literal_eval(call.args[0]))
    raise AssertionError("tests/conftest.py defines no E2E_FIXTURES")


def test_every_e2e_fixture_is_defined() -> None:
    fixtures = e2e_fixtures()
    assert "slurm_cluster" in fixtures
    missing = sorted(fixtures - fixtures_defined(fixtures))
    assert not missing, f"tests/conftest.py's E2E_FIXTURES names no fixture: {missing}"


def test_the_fixture_finder_finds_them() -> None:
    names = {"c_client", "slurm_cluster", "_shm_guard", "no_such_fixture", "load"}
    # (`load`, below: a function, not a fixture)
    assert fixtures_defined(names) == {"c_client", "slurm_cluster", "_shm_guard"}


def load(relative: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_grid_{Path(relative).stem}", TESTS / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def option_key(value: object) -> str:
    return repr(value)  # (an option set may be a dict: unhashable)


@pytest.mark.parametrize(("relative", "position"), GRIDS.items())
def test_a_cut_grid_keeps_every_option_set_in_the_inner_tier(relative: str, position: int) -> None:
    cases = load(relative).grid()
    inner = [c for c in cases if not any(m.name == "e2e" for m in c.marks)]
    outer = [c for c in cases if c not in inner]
    assert inner and outer, f"{relative}: the grid is not cut (or cut whole)"
    assert all(m.name == "e2e" for c in outer for m in c.marks)
    every = {option_key(c.values[position]) for c in cases}
    kept = {option_key(c.values[position]) for c in inner}
    assert kept == every, f"{relative}: option sets only the full suite runs: {every - kept}"
    assert len({tuple(map(option_key, c.values)) for c in cases}) == len(cases)  # no twice
