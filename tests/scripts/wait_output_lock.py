"""Waits for an output directory's lock held by a stopping holder, counting its polls:
the lock tests' second trainer (a requeue that starts while the first one stops).

    python tests/scripts/wait_output_lock.py OUTPUT_DIR POLLS

Takes the lock of OUTPUT_DIR (run id ``waiter``) with an unbounded stopping wait, its
polls 1 ms apart (what is tested is their count, not their pace). Prints ``polled
POLLS`` once its wait has polled POLLS times (the test then lets the holder go), then
``taken`` once it holds the lock, and exits 0; a refusal is raised (exit status 1).
"""

from __future__ import annotations

import sys
import time

from melissa_trainer.trainer import output_lock
from melissa_trainer.trainer.output_lock import OutputDirLock

output_dir, wanted = sys.argv[1], int(sys.argv[2])
output_lock._POLL = 0.001
polls = 0
pause = time.sleep


def counted(seconds: float) -> None:
    """`time.sleep`, counting the wait's polls (a dedicated process: nothing else
    sleeps here that polls for 1 ms)."""
    global polls
    if seconds == output_lock._POLL:
        polls += 1
        if polls == wanted:
            print(f"polled {polls}", flush=True)
    pause(seconds)


time.sleep = counted
lock = OutputDirLock(output_dir, "waiter")
lock.acquire(stopping_wait=1e9)
print("taken", flush=True)
lock.release()
