"""The examples type-check as the package does (this repository's mypy configuration):
the package's own mypy run (`tox -e typecheck`, pyproject's ``packages``) never reads
them, and an example's type error was once a real bug (`heat_guess.train.OddConv`'s
int attribute ``half`` shadowed `torch.nn.Module.half`). Each example folder is checked
from inside itself, with examples/ on MYPYPATH, as its train.py imports its siblings and
the shared ``study_*`` modules by their plain names (checked from the repository root,
``study_args`` is not found and is read as ``Any``: its errors went unseen)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tooling import missing_tool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _folders() -> list[Path]:
    return [EXAMPLES, *sorted(p for p in EXAMPLES.iterdir() if any(p.glob("*.py")))]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for every folder (torch's types are read once, not seven times)."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("folder", _folders(), ids=lambda p: p.name)
def test_the_example_type_checks(folder: Path, cache: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        missing_tool("needs mypy (in the test extra: pip install -e '.[test]')")
    files = sorted(p.name for p in folder.glob("*.py"))
    env = {**os.environ, "MYPYPATH": str(EXAMPLES)}
    cmd = [
        sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
        "--cache-dir", str(cache), *files,
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, f"mypy in {folder}:\n{done.stdout}{done.stderr}"
