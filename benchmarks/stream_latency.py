"""Stream latency: a step sent by a slow simulation, until the trainer's reader has it.

Ours: a simulation thread sends one 1 KB field every `period` seconds through a
`Client` (unbatched: `batch_bytes=0`, as a simulation sending further apart than
`batch_delay` is) into a `StreamSource`, and a `StreamDataset` of batch size 1 takes
each sample as the training loop would, starved for data (the case where waiting
matters). Latency: from just before `send` to `_take` returning the sample. Baseline:
the same messages (the same bytes, one frame) over a plain pyzmq PUSH/PULL pair in
this process, from just before `send` to `recv` returning. A and B alternate; the
table gives medians over all samples of all rounds, and the 90th percentile; ratio =
baseline / ours (higher is better; there is no target in the issues).

    python benchmarks/stream_latency.py            # about 20 s
    python benchmarks/stream_latency.py --json     # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable

import numpy as np
import zmq
from report import add_flags, finish

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.core.dataset import StreamDataset
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.stream_source import StreamSource

FIELD = 256  # float32 elements: 1 KB


def _paced(n: int, period: float, send: Callable[[int], None], sent: list[float]) -> None:
    for t in range(n):
        time.sleep(period)
        sent[t] = time.perf_counter()
        send(t)


def run_ours(n: int, period: float) -> list[float]:
    buffer = FIFOBuffer(1024)
    source = StreamSource(ReceiverConfig(expected_simulations=1))
    source.start(buffer, 0, 1)
    sent = [0.0] * n
    field = np.ones(FIELD, np.float32)

    def simulation() -> None:
        spec = {"u": ((FIELD,), "float32")}
        with Client(
            spec, None, 1, [str(source.endpoint)], tuning=ClientTuning(batch_bytes=0)
        ) as client:
            _paced(n, period, lambda t: client.send(t, u=field), sent)

    sim = threading.Thread(target=simulation, daemon=True)
    latencies = []
    try:
        sim.start()
        dataset = StreamDataset(buffer, 1, source=source)
        while True:
            samples = dataset._take()
            if not samples:
                break
            latencies.append(time.perf_counter() - sent[int(samples[0]["time_step"])])
        sim.join(30)
    finally:
        source.stop()
    if len(latencies) != n:
        raise RuntimeError(f"{len(latencies)} samples arrived, {n} expected")
    return latencies[1:]  # the first includes the connection


def run_raw(n: int, period: float) -> list[float]:
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    push.connect(f"tcp://127.0.0.1:{port}")
    sent = [0.0] * n
    message = bytes(FIELD * 4 + 64)
    sender = threading.Thread(
        target=_paced, args=(n, period, lambda t: push.send(message), sent), daemon=True
    )
    latencies = []
    try:
        sender.start()
        for t in range(n):
            pull.recv()
            latencies.append(time.perf_counter() - sent[t])
        sender.join(30)
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()
    return latencies[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300, help="steps per round")
    parser.add_argument("--period", type=float, default=0.005, help="seconds between sends")
    opts = parser.parse_args()
    ours: list[float] = []
    base: list[float] = []
    for _ in range(opts.rounds):
        ours += run_ours(opts.steps, opts.period)
        base += run_raw(opts.steps, opts.period)
    rows = []
    for label, q in (("median", 0.5), ("p90", 0.9)):
        a = sorted(ours)[int(q * (len(ours) - 1))] * 1e3
        b = sorted(base)[int(q * (len(base) - 1))] * 1e3
        case = f"1 KB every {opts.period * 1e3:g} ms, starved reader, {label}"
        rows.append(
            {"case": case, "ours": round(a, 3), "baseline": round(b, 3), "unit": "ms",
             "ratio": round(b / a, 3), "target": None}
        )  # fmt: skip
    title = f"{opts.rounds} interleaved rounds of {opts.steps} steps; ratio = baseline / ours"
    mean = f"mean of ours: {statistics.fmean(ours) * 1e3:.3f} ms over {len(ours)} samples"
    finish(rows, title, 48, as_json=opts.json, notes=[mean])


if __name__ == "__main__":
    main()
