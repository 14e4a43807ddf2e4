"""A trainer's forked child (a DataLoader worker, fork start method) that outlives the
trainer's ``kill -9`` does not keep the output directory locked: the child closes its
copies of the lock file's descriptor and of the host lock's socket at the fork
(`output_lock`, `host_lock`). Before, both stayed held by the child: a requeued trainer
was refused while a worker lived on, naming the dead trainer's pid."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from melissa_trainer.trainer.lock_holder import LOCK_FILE
from melissa_trainer.trainer.output_lock import OutputDirLock

pytestmark = [
    pytest.mark.e2e,  # (a holder process and its child)
    pytest.mark.skipif(sys.platform != "linux", reason="fork, and the host lock is Linux's"),
]

#: takes the lock of argv[1] and forks a child that prints its pid and whether it holds
#: the lock, then lives until its stdin ends; the holder waits to be killed
HOLDER = r"""
import os, sys
from melissa_trainer.trainer.output_lock import OutputDirLock
lock = OutputDirLock(sys.argv[1], "first")
lock.acquire(stopping_wait=0.0)
if os.fork() == 0:
    print(os.getpid(), lock.held, flush=True)
    sys.stdin.buffer.read()  # (until the test closes it)
    os._exit(0)
sys.stdin.buffer.read()
"""


@pytest.mark.timeout(60)
def test_a_forked_child_alive_after_its_trainers_kill_9_holds_no_lock(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    child = -1
    try:
        pid, held = proc.stdout.readline().split()
        child = os.pidfd_open(int(pid))  # (the child is the holder's: watched, not waited)
        assert held == "False"  # the child holds no lock of its own after the fork
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        assert not select.select([child], [], [], 0)[0]  # the child lives on
        lock = OutputDirLock(out, "requeued")
        lock.acquire(stopping_wait=0.0)  # refused before: the child held both locks
        assert f'"pid": {os.getpid()}' in (out / LOCK_FILE).read_text()
        lock.release()
    finally:
        proc.stdin.close()  # (the child's stdin ends: it exits)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if child >= 0:
            assert select.select([child], [], [], 30)[0], "the forked child did not exit"
            os.close(child)
