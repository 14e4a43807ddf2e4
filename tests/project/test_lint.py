"""The repository is as clean as its standards say: ruff's checks and its formatter
over the package, tests, benchmarks and examples (pyproject's ``[tool.ruff]``), and
mypy over the package (pyproject's ``[tool.mypy]``, `tox -e typecheck`'s run). Nothing
ran them in CI: a line too long in tests/conftest.py landed on main unseen (2026-12-04).
The examples' mypy run is test_examples_typecheck.py's."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from tooling import missing_tool

ROOT = Path(__file__).resolve().parents[2]
PATHS = ["melissa_trainer", "tests", "benchmarks", "examples"]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_finds_nothing(command: list[str]) -> None:
    if importlib.util.find_spec("ruff") is None:
        missing_tool("needs ruff (in the test extra: pip install -e '.[test]')")
    done = _run("ruff", *command, *PATHS)
    assert done.returncode == 0, f"ruff {' '.join(command)}:\n{done.stdout}{done.stderr}"


@pytest.mark.timeout(600)
def test_mypy_finds_nothing_in_the_package(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        missing_tool("needs mypy (in the test extra: pip install -e '.[test]')")
    done = _run("mypy", "--cache-dir", str(tmp_path / "mypy-cache"), timeout=540)
    assert done.returncode == 0, f"mypy:\n{done.stdout}{done.stderr}"
