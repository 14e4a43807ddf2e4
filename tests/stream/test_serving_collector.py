"""The serving socket's replies never wait on pyzmq's collector thread
(`serving_bind`'s docstring): a `PredictServer` answering 3,000 predictions of 64 KiB
while that thread is stalled answers them all (`serving_stalled_collector.py`, run as
a process of its own: a hang there holds Python's lock, which no timeout in this
process could break).

Failed before (replies sent without a copy): the process hung, killed at the bound
below, no answer printed: the answers' frames, let go of by a blocking send to the
collector's full queue, once from the I/O thread holding Python's lock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("serving_stalled_collector.py")
#: a healthy run takes about a second here; only a hang reaches it
BOUND = 60


@pytest.mark.e2e  # (a process of its own)
@pytest.mark.timeout(BOUND + 30)
def test_answers_do_not_wait_for_a_stalled_collector() -> None:
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "3000"], capture_output=True, text=True, timeout=BOUND
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server hung with pyzmq's collector stalled (killed at {BOUND} s)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ANSWERED", "3000"], done.stdout
