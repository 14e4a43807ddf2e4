"""Where a received message's CPU goes, without the network: the socket prefilled.

A client process sends `--count` DATA messages of one float32 field into a `Receiver`
whose socket holds them all (its thread kept idle by pumps), then this thread ingests
them by pumps and takes them out of a FIFO buffer (`get_batch`, or `get_block` for
batched small fields), as `benchmarks/ingest.py`'s reader does, and its thread CPU
time per message is measured: with the receiver's finiteness check
(``nonfinite="refuse"``, the default) and without (``"accept"``). Baseline: a raw pyzmq
``recv(copy=False)`` loop taking the same count of messages of the same size from a
prefilled PULL socket. With no wait for the network, what is left is the receive path's
own cost: polls, decode, dedup, the sample's arrays, the check (a pass over payloads that
have gone cold in memory meanwhile), the buffer's put and get. A and B alternate; medians.

    python benchmarks/ingest_breakdown.py                 # 1 MB and 128 KB fields
    python benchmarks/ingest_breakdown.py --sizes 1024 --json   # KiB per field
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import zmq

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig, ReceiverTuning

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as bench  # noqa: E402
from report import add_flags, finish  # noqa: E402


def ours(nbytes: int, count: int, nonfinite: str) -> float:
    """Thread CPU microseconds per message for pumps and reads of `count` waiting
    messages of `nbytes` fields."""
    buffer = FIFOBuffer(count + 8)
    config = ReceiverConfig(expected_simulations=1, rcvhwm=count + 10, nonfinite=nonfinite)
    # takeover: the thread never serves once a pump came (the first, just below)
    rec = Receiver(buffer, config=config, tuning=ReceiverTuning(takeover=1e6, pump_budget=60))
    rec.start()
    rec.pump()
    proc = bench._spawn(bench.CLIENT_CODE, [rec.endpoint, 1, nbytes, count, count + 10, 0, "never"])
    try:
        bench._go([proc])
        proc.wait(300)  # every message is in the receiver's socket (or on its way)
        # settle: libzmq's I/O thread may still queue the last messages; any not yet
        # queued are still counted (the loop runs to the end of the stream), only later
        time.sleep(0.5)
        get = buffer.get_batch if nbytes > bench.INLINE_MAX else buffer.get_block
        cpu0 = time.thread_time()
        while not (rec.ended and len(buffer) == 0):
            rec.pump()
            k = min(len(buffer), 8)
            if k:
                get(k, timeout=0.0)
        cpu = time.thread_time() - cpu0
        put = rec.telemetry()["samples_put"]
        if put != count:
            raise RuntimeError(f"{put} samples put, expected {count}")
        return cpu / count * 1e6
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        buffer.close()
        rec.stop()


def raw(nbytes: int, count: int) -> float:
    """Thread CPU microseconds per message of a raw recv loop on a prefilled socket."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, count + 10)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    size = bench._wire_bytes(nbytes)
    proc = bench._spawn(bench.RAW_CODE, [f"tcp://127.0.0.1:{port}", size, count, count + 10])
    try:
        bench._go([proc])
        proc.wait(300)
        # settle, as in `ours` (recv blocks for any message not queued yet)
        time.sleep(0.5)
        recv = sock.recv
        cpu0 = time.thread_time()
        for _ in range(count):
            recv(copy=False)
        return (time.thread_time() - cpu0) / count * 1e6
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        sock.close(linger=0)
        ctx.term()


def rows_of(kib: int, count: int, rounds: int) -> list[dict[str, Any]]:
    nbytes = kib * 1024
    runs: dict[str, list[float]] = {"refuse": [], "accept": [], "raw": []}
    for _ in range(rounds):
        runs["refuse"].append(ours(nbytes, count, "refuse"))
        runs["accept"].append(ours(nbytes, count, "accept"))
        runs["raw"].append(raw(nbytes, count))
    base = statistics.median(runs["raw"])
    label = f"{kib} KiB fields, {count} waiting messages"
    return [
        {
            "case": f"{label}: CPU us/msg, nonfinite={policy}",
            "ours": round(statistics.median(runs[policy]), 2),
            "baseline": round(base, 2),
            "unit": "us/msg",
            "ratio": round(base / statistics.median(runs[policy]), 3),
            "target": None,
        }
        for policy in ("refuse", "accept")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,128", help="KiB per field, e.g. 1024,128")
    parser.add_argument("--count", type=int, default=200, help="messages per run (1 MiB)")
    parser.add_argument("--rounds", type=int, default=5)
    add_flags(parser)
    opts = parser.parse_args()
    rows = []
    for kib in (int(s) for s in opts.sizes.split(",")):
        count = max(opts.count, opts.count * 1024 // kib // 4)  # same time, more messages
        rows += rows_of(kib, count, opts.rounds)
    title = f"medians of {opts.rounds} interleaved rounds; baseline: raw pyzmq"
    finish(rows, title, 64, as_json=opts.json)


if __name__ == "__main__":
    main()
