"""Skips say why, and a tool CI installs is never skipped there (`tests/tooling.py`):
a pytest run, with the project's own configuration, of a test that misses a tool and
one that skips for another reason, with and without ``CI=true``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

ROOT = Path(__file__).parents[2]

PROBE = """
import pytest
from tooling import missing_tool

def test_needs_a_tool():
    missing_tool("needs frobnicate to build the frob client")

def test_skips_for_another_reason():
    pytest.skip("the frob cluster needs root")
"""


def run_probe(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), env.get("PYTHONPATH")]))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        # the project's addopts (-n auto: one worker is enough here), as `pytest -q` runs
        [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-n", "1", "-p", "no:cacheprovider", str(probe)],
        capture_output=True, text=True, timeout=100, env=env, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_every_run_says_why_a_test_skipped(tmp_path: Path) -> None:
    proc = run_probe(tmp_path, None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 skipped" in proc.stdout
    assert "needs frobnicate to build the frob client" in proc.stdout, proc.stdout
    assert "the frob cluster needs root" in proc.stdout, proc.stdout


@pytest.mark.timeout(120)
def test_under_ci_a_missing_tool_fails_saying_what_is_missing(tmp_path: Path) -> None:
    proc = run_probe(tmp_path, "true")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in proc.stdout and "1 skipped" in proc.stdout, proc.stdout
    assert (
        "CI=true, and needs frobnicate to build the frob client: .ci/run installs it"
    ) in proc.stdout
    assert "the frob cluster needs root" in proc.stdout  # still a skip
    # the summary still names what failed (a bare -rs in addopts replaced pytest's
    # default -rfE: 10 failures of a suite run went unnamed in its summary)
    assert "FAILED test_probe.py::test_needs_a_tool" in proc.stdout, proc.stdout
