"""The cost of a client's replay window (`ClientTuning.replay_bytes`: each `send` copies
its arrays, `melissa_trainer.client.replay`), which is on by default only in external
mode (a rendezvous read by a simulation the launcher did not start).

Ours: a `Client` reading a rendezvous, with the default window (64 MiB). Baseline: the
same client with ``replay_bytes=0`` (no window, no following: what every client did
before). One client sends `--steps` steps of one float32 field (1 KB and 1 MB) to a
PULL socket drained by a thread of this process; the clock runs from the first send to
the end of `close`. A and B alternate (A B A B ...), medians compared; ratio = ours /
baseline (higher is better). `--json` prints ``{"rows": [...]}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

import numpy as np
import zmq

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.common.json_output import to_json
from melissa_trainer.stream.endpoints import write_rendezvous


def run(size: int, steps: int, replay: int | None, rendezvous: str, endpoint: str) -> float:
    tuning = ClientTuning(replay_bytes=replay)
    u = np.ones(size // 4, dtype="<f4")
    start = time.perf_counter()
    with Client({"u": (u.shape, "<f4")}, {}, simulation_id=1, tuning=tuning) as c:
        for t in range(steps):
            c.send(t, u=u)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    endpoint = pull.getsockopt_string(zmq.LAST_ENDPOINT)
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            if pull.poll(50):
                pull.recv_multipart(copy=False)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        write_rendezvous(tmp, 0, 1, endpoint, {"run_id": "bench"})
        os.environ["MELISSA_TRAINER_RENDEZVOUS"] = tmp
        for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_ATTEMPT",
                     "MELISSA_TRAINER_REPLAY_BYTES", "MELISSA_TRAINER_RUN_ID"):  # fmt: skip
            os.environ.pop(name, None)
        for size, steps in ((1024, 50_000), (1 << 20, 300)):
            ours, base = [], []
            for _ in range(args.rounds):
                ours.append(run(size, steps, None, tmp, endpoint))
                base.append(run(size, steps, 0, tmp, endpoint))
            o, b = statistics.median(ours), statistics.median(base)
            rows.append({"case": f"client send, {size} B field, replay window (64 MiB) vs none",
                         "ours": round(o), "baseline": round(b), "unit": "steps/s",
                         "ratio": round(o / b, 3), "target": None})  # fmt: skip
    stop.set()
    thread.join()
    pull.close(linger=0)
    ctx.term()
    if args.json:
        print(to_json({"rows": rows}))
    else:
        for r in rows:
            print(f"{r['case']}: ours {r['ours']:,}/s, baseline "
                  f"{r['baseline']:,}/s, ratio {r['ratio']}")  # fmt: skip


if __name__ == "__main__":
    main()
