"""Holds an output directory's lock, as a trainer's rank 0 does: the lock tests' holder.

    python tests/scripts/hold_output_lock.py OUTPUT_DIR STATE GO_FILE

Takes the lock of OUTPUT_DIR (run id ``holder``), says STATE in it (``running``,
``stopping``, or ``ended``: what a holder writes as it lets go), prints ``held`` on
stdout, then waits for GO_FILE to exist (at most 120 s) and exits, which releases the
lock (the kernel does, or SIGKILL does).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from melissa_trainer.trainer.output_lock import OutputDirLock

output_dir, state, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
lock = OutputDirLock(output_dir, "holder")
lock.acquire(stopping_wait=0.0)
if state == "stopping":
    lock.stopping()
elif state == "ended":  # the moment between `release`'s record and its unlock
    lock._write("ended")
print("held", flush=True)
deadline = time.monotonic() + 120
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
