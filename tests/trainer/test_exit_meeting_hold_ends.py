"""`hold_term` at exit: the hold ends at its grace even when the process is still in its
teardown (an `atexit` handler that lasts), and a SIGTERM within the grace at exit leaves
the process its own status (the review's hrev6: `exiting` ignored SIGTERM for good)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])

CHILD = r"""
import atexit, os, sys, time
os.environ["TORCHELASTIC_RUN_ID"] = "x"
from melissa_trainer.trainer.exit_meeting import hold_term
def teardown():  # a teardown that lasts (runs after the hold's own atexit handler)
    print("teardown", flush=True)
    time.sleep(float(sys.argv[2]))
atexit.register(teardown)
hold_term(grace=float(sys.argv[1]))
print("exiting", flush=True)
sys.exit(3)
"""


def _child(grace: float, teardown: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(grace), str(teardown)],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_sigterm_past_the_grace_ends_a_process_still_in_its_teardown() -> None:
    p = _child(grace=1.0, teardown=60.0)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "exiting"
        assert p.stdout.readline().strip() == "teardown"
        # past the 1 s grace (the teardown sleeps 60 s): SIGTERM ends it again
        while p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                continue
        assert p.returncode == -signal.SIGTERM
    finally:
        p.kill()
        p.wait()


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_sigterm_within_the_grace_at_exit_leaves_the_process_its_own_status() -> None:
    p = _child(grace=300.0, teardown=2.0)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "exiting"
        assert p.stdout.readline().strip() == "teardown"
        p.send_signal(signal.SIGTERM)  # within the grace, in the teardown: ignored
        assert p.wait(timeout=60) == 3
    finally:
        p.kill()
        p.wait()


FINALIZING = r"""
import os, signal, sys, time
if sys.argv[1] == "hold":
    os.environ["TORCHELASTIC_RUN_ID"] = "x"
    from melissa_trainer.trainer.exit_meeting import hold_term
    hold_term(grace=300.0)
else:  # a handler of Python's own: finalization puts the default back
    signal.signal(signal.SIGTERM, lambda *a: None)
class AtFinalization:  # (a module global: its __del__ runs as the modules are finalized)
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
keep = AtFinalization()
sys.exit(3)
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.parametrize(("mode", "status"), [("plain", -signal.SIGTERM), ("hold", 3)])
def test_a_sigterm_at_finalization_within_the_grace_is_ignored(mode: str, status: int) -> None:
    """What the hold at exit is for: CPython's finalization gives a Python-handled SIGTERM
    its default action back (the plain handler's process ends -15), the hold keeps the
    process's own status."""
    p = subprocess.run(
        [sys.executable, "-c", FINALIZING, mode],
        env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin"},
        timeout=100,
    )
    assert p.returncode == status
