"""The summary says how many tests ``-m`` deselected, under pytest-xdist too
(tests/deselected_summary.py, the hooks tests/conftest.py imports). Before, ``pytest -m
"not e2e" -n 2`` ended "2800 passed, 2 skipped": xdist's controller never hears of the
workers' deselection, and the e2e tier's absence went unsaid (user trial htrial20).

A tiny suite in a folder of its own (3 tests, 2 of them e2e), its conftest importing the
same hooks, run by a pytest subprocess with 2 workers and with none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TESTS = Path(__file__).resolve().parents[1]

SUITE = {
    "conftest.py": (
        "import pytest\n"
        "from deselected_summary import (  # noqa: F401\n"
        "    pytest_deselected, pytest_terminal_summary, pytest_testnodedown,\n"
        ")\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'e2e: end to end')\n"
    ),
    "test_tiny.py": (
        "import pytest\n"
        "def test_inner():\n    pass\n"
        "@pytest.mark.e2e\ndef test_outer_1():\n    pass\n"
        "@pytest.mark.e2e\ndef test_outer_2():\n    pass\n"
    ),
    "pytest.ini": "[pytest]\n",  # (this folder is its rootdir: not the project's addopts)
}


def run_tiny(folder: Path, *flags: str) -> str:
    for name, text in SUITE.items():
        (folder / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(TESTS), "PYTEST_ADDOPTS": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-q", *flags],
        capture_output=True, text=True, timeout=150, cwd=folder, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


LINE = (
    "2 tests deselected by -m 'not e2e' (the inner tier); the README's test command runs them all"
)


def test_with_two_workers_the_deselected_tests_are_said(tmp_path: Path) -> None:
    out = run_tiny(tmp_path, "-n", "2", "-m", "not e2e")
    assert LINE in out.splitlines(), out
    assert "1 passed" in out


def test_without_workers_and_without_m_as_before(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    out = run_tiny(tmp_path / "one", "-n", "0", "-m", "not e2e")
    assert LINE in out.splitlines(), out
    (tmp_path / "all").mkdir()
    out = run_tiny(tmp_path / "all", "-n", "2")  # nothing deselected: no line
    assert "deselected" not in out and "3 passed" in out, out
