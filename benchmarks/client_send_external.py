"""What a solver started by hand (external mode) pays per `send` while its trainer takes
it: the usual send, and the first sends, while the client's admission watch asks whether
the trainer took the simulation (`melissa_trainer.client.admission_watch`).

A `Receiver` with a rendezvous runs in a process of its own (its study's fields: the
client's, so the simulation is taken). Clients alternate: one whose endpoints come from
that rendezvous (``MELISSA_TRAINER_RENDEZVOUS``, no ``MELISSA_TRAINER_ATTEMPT``: ours),
one given the same endpoint directly (nothing asked: the baseline); each sends
`--messages` steps of a 1 KB float32 field. Rows: the wall time per send of the first 50
sends (made at once after the client: while the watch's thread starts and asks) and the
sending thread's CPU per send (`time.thread_time`) of the sends after, medians of
`--rounds` clients of each kind; ratio = baseline / ours. Compare two versions of the
package with `benchmarks/ab.py` (``--head_scripts``: this script under both; its
``change`` is the watch's cost)::

    python benchmarks/ab.py --base <rev> --head_scripts "client_send_external.py"
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

#: the receiver's process: serves the rendezvous given until its stdin closes
RECEIVER = r"""
import sys
import numpy as np
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
config = ReceiverConfig(fields={"u": ((256,), np.float32)}, rendezvous_dir=sys.argv[1])
rec = Receiver(FIFOBuffer(1_000_000), 0, 1, config)
rec.start()
print("ready", flush=True)
sys.stdin.read()
rec.stop()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer rounds and sends")
    parser.add_argument("--rounds", type=int, default=None, help="clients of each kind (15)")
    parser.add_argument("--messages", type=int, default=None, help="sends each (default 3000)")
    opts = parser.parse_args()
    rounds = opts.rounds or (5 if opts.quick else 15)
    messages = opts.messages or (1000 if opts.quick else 3000)
    from melissa_trainer.client import Client

    first: dict[bool, list[float]] = {True: [], False: []}
    usual: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="client_send_external_") as rendezvous:
        receiver = subprocess.Popen(
            [sys.executable, "-c", RECEIVER, rendezvous],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
            os.environ["MELISSA_TRAINER_RENDEZVOUS"] = rendezvous
            for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_ATTEMPT"):
                os.environ.pop(name, None)
            endpoint = json.loads((Path(rendezvous) / "rank_0.json").read_text())["endpoint"]
            u = np.ones(256, np.float32)
            for sid in range(2 * rounds):
                external = sid % 2 == (sid // 2) % 2  # (the order alternates each round)
                given = None if external else [endpoint]
                with Client({"u": ((256,), "float32")}, None, sid, given) as client:
                    start = time.perf_counter()
                    for t in range(50):
                        client.send(t, u=u)
                    first[external].append((time.perf_counter() - start) / 50 * 1e6)
                    start = time.thread_time()
                    for t in range(50, 50 + messages):
                        client.send(t, u=u)
                    usual[external].append((time.thread_time() - start) / messages * 1e6)
        finally:
            assert receiver.stdin is not None
            receiver.stdin.close()
            receiver.wait(60)
    rows = []
    for case, runs in (
        ("wall per Client.send, first 50 sends", first),
        ("sender CPU per Client.send after", usual),
    ):
        ours, base = statistics.median(runs[True]), statistics.median(runs[False])
        rows.append(
            {
                "case": f"external mode vs endpoints given: {case} (1 KB float32)",
                "ours": ours,
                "baseline": base,
                "unit": "us",
                "ratio": base / ours,
                "target": None,
            }
        )
    title = f"{rounds} clients of each kind, {50 + messages} sends each; medians"
    finish(rows, title, 60, as_json=opts.json, notes=[], table_too=True)


if __name__ == "__main__":
    main()
