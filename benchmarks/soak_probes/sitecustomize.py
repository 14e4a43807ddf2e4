"""Probes for `benchmarks/soak.py`'s trainer, loaded by every Python process started
with this directory on ``PYTHONPATH`` (Python imports ``sitecustomize`` at start-up):

* ``SOAK_TRIM=1``: glibc's ``malloc_trim(0)`` every 2 s, from a daemon thread (what
  the allocator keeps of the study's RSS growth: the soak's RSS row with it against
  without);
* ``SOAK_TRACE=1``: `tracemalloc` in the study's trainer (``train.py`` without
  ``--external``), a snapshot dumped to ``$SOAK_TRACE_DIR/trace_PID_N.pickle`` when its
  study has finished 300 and then 900 simulations (``N`` = 1, 2; compare them with
  ``Snapshot.load(...).compare_to``).

    export PYTHONPATH=$PWD/benchmarks/soak_probes
    SOAK_TRIM=1 python benchmarks/soak.py --simulations 1500 --idle 30
    SOAK_TRACE=1 SOAK_TRACE_DIR=/tmp python benchmarks/soak.py --simulations 1000 --idle 30

Experiments: nothing of the library reads these variables.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
import threading
import time


def _trim_every(seconds: float) -> None:
    trim = ctypes.CDLL(None).malloc_trim
    while True:
        time.sleep(seconds)
        trim(0)


def _snapshots(out: str, where: str) -> None:
    import tracemalloc

    progress = os.path.join(out, "rendezvous", "study_progress.json")
    for n, at in ((1, 300), (2, 900)):
        while True:
            time.sleep(0.5)
            # (absent or half-written at times: read again at the next tick)
            with contextlib.suppress(OSError, ValueError, KeyError):
                with open(progress) as f:
                    done = int(json.load(f)["finished"])
                if done >= at:
                    break
        stem = os.path.join(where, f"trace_{os.getpid()}_{n}")
        tracemalloc.take_snapshot().dump(stem + ".pickle")
        with open(stem + ".at", "w") as f:
            f.write(str(done))


if os.environ.get("SOAK_TRIM"):
    threading.Thread(target=_trim_every, args=(2.0,), daemon=True).start()
if (
    os.environ.get("SOAK_TRACE")
    and sys.argv[0].endswith("train.py")
    and "--external" not in sys.argv
    and "--output_dir" in sys.argv
):
    import tracemalloc

    tracemalloc.start(1)
    _out = sys.argv[sys.argv.index("--output_dir") + 1]
    _where = os.environ.get("SOAK_TRACE_DIR", ".")
    threading.Thread(target=_snapshots, args=(_out, _where), daemon=True).start()
