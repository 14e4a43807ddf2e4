"""The tiers' rule, checked on a suite written for the purpose: with this project's
tests/conftest.py, a test without the ``e2e`` marker that starts a process fails (by
subprocess, multiprocessing or fork), a marked one passes, and ``-m "not e2e"`` runs
only the unmarked."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # it starts pytest

TESTS = textwrap.dedent(
    """
    import multiprocessing, os, subprocess, sys
    import pytest

    def test_in_process():
        assert sum(range(4)) == 6

    def test_unmarked_subprocess():
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    def test_unmarked_multiprocessing():
        p = multiprocessing.get_context("spawn").Process(target=print)
        p.start(); p.join()

    def test_unmarked_fork():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    @pytest.mark.e2e
    def test_marked_subprocess():
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    """
)


def conftest_and_its_modules() -> list[Path]:
    """tests/conftest.py and every module beside it that it imports (the copy must
    load as the real one does: a module added to its imports is copied too)."""
    tests = Path(__file__).parents[1]
    conftest = tests / "conftest.py"
    names = set()
    for node in ast.walk(ast.parse(conftest.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return [conftest, *sorted(tests / f"{n}.py" for n in names if (tests / f"{n}.py").is_file())]


def run_suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    for path in conftest_and_its_modules():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "test_fake.py").write_text(TESTS)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-q", "-rfE", str(tmp_path), *args],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip


def test_the_copied_suite_takes_the_conftests_own_modules() -> None:
    names = {path.name for path in conftest_and_its_modules()}
    assert {"conftest.py", "deselected_summary.py", "wait_said.py"} <= names


@pytest.mark.timeout(300)
def test_an_unmarked_test_that_starts_a_process_fails_naming_it(tmp_path: Path) -> None:
    result = run_suite(tmp_path)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "5 passed, 3 errors" in out, out  # the three fail at teardown
    for name in ("subprocess", "multiprocessing", "fork"):
        assert f"ERROR test_fake.py::test_unmarked_{name}" in out, out
    assert "without the e2e marker" in out and "mark it @pytest.mark.e2e" in out


@pytest.mark.timeout(300)
def test_the_inner_tier_runs_the_unmarked_only(tmp_path: Path) -> None:
    result = run_suite(tmp_path, "-m", "not e2e", "-k", "in_process or test_marked")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 4 deselected" in result.stdout, result.stdout  # (the marked one too)
