"""`process_tree.run_group` on a timeout ends the whole tree it started, sessions of their own
included: torch elastic starts each rank with ``start_new_session``, so the SIGKILL of
the launcher's process group alone left a rank stuck in a collective running after its
test (hrank3 saw two ranks outlive a timed-out ``accelerate launch``). Before: the
grandchild below, in a session of its own, was still alive after the timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from process_tree import run_group
from waiting import wait_until

#: a "launcher" that starts a "rank" in a session of its own, writes its pid, and waits
LAUNCHER = """
import subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                        start_new_session=True)
open(sys.argv[1], "w").write(str(rank.pid))
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.e2e  # (waits its 10 s bound)
@pytest.mark.timeout(60)
def test_a_timed_out_run_kills_a_child_in_a_session_of_its_own(tmp_path: Path) -> None:
    pid_file = tmp_path / "rank.pid"
    cmd = [sys.executable, "-c", LAUNCHER, str(pid_file)]
    # (the bound is the case under test, not a wait for an event: the launcher writes
    # the rank's pid within a second of its start; 10 s leave a loaded machine room)
    with pytest.raises(subprocess.TimeoutExpired):
        run_group(cmd, timeout=10)
    assert pid_file.is_file(), "the launcher did not start its rank within 10 s"
    rank = int(pid_file.read_text())
    try:
        wait_until(lambda: not _alive(rank), lambda: f"rank {rank} still alive", 10)
    finally:
        if _alive(rank):
            os.kill(rank, 9)
