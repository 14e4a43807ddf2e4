"""One run of `benchmarks/ingest.py`'s "ours" case, for profilers: prints the native
thread ids of the thread that pumps and reads (the reader's) and of the receiver's
thread, then the run's seconds and receiving-thread CPU seconds as JSON.

A diagnostic, to attribute what a message costs by thread under ``strace -f`` or
``perf record``, e.g. (1 MB fields, 1000 messages)::

    strace -f -qq -e trace=poll,read,getpid -o /tmp/st.txt \\
        python benchmarks/ingest_drain.py --count 1000
    perf record -F 4000 -g -o /tmp/perf.data -- python benchmarks/ingest_drain.py
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from melissa_trainer.common.json_output import to_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as bench  # noqa: E402
import reader  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kib", type=int, default=1024, help="KiB per field")
    parser.add_argument("--count", type=int, default=3000, help="messages")
    parser.add_argument("--reuse", default="immediate", help="the client's array_reuse")
    parser.add_argument("--nonfinite", default="refuse", choices=["refuse", "accept"])
    opts = parser.parse_args()
    drain = reader.drain

    def traced(receiver: Any, buffer: Any, nbytes: int) -> None:
        thread = receiver._thread
        print(f"reader thread {threading.get_native_id()}", flush=True)
        print(f"receiver thread {thread.native_id}", flush=True)
        drain(receiver, buffer, nbytes)

    reader.drain = traced  # (ingest_arms.run_ours, ingest.run_ours, calls reader.drain)
    seconds, cpu = bench.run_ours(opts.kib * 1024, 1, opts.count, opts.reuse, opts.nonfinite)
    print(to_json({"seconds": seconds, "cpu_us_per_msg": cpu / opts.count * 1e6}))


if __name__ == "__main__":
    main()
