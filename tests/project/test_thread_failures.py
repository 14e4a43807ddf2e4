"""A failed assertion (or any exception) in a thread a test starts fails that test.

pytest only warns (``PytestUnhandledThreadExceptionWarning``) when a thread other than
the test's dies of an exception: a check made in a thread, whose failure the test never
joined back, passed with a warning (tests/launcher/backends/test_local_launch.py's
launching-thread check did). pyproject's ``filterwarnings`` turns that warning into an
error. Failed before: the inner run below passed (exit 0, one warning)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

INNER = """
import threading

def test_a_thread_s_check_fails():
    def check():
        assert 1 == 2, "the thread's check"
    thread = threading.Thread(target=check)
    thread.start()
    thread.join()
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_an_exception_in_a_thread_fails_the_test(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
        + ["-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path)]
        + [str(tmp_path / "test_inner.py")],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=tmp_path,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed" in out and "the thread's check" in out, out
