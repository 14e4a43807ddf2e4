"""`ingest.py`'s pinned rows (Linux, 2 cores or more): the workload on one core while a
client streams 1 KB fields at 20k msgs/s from another, trained on that stream (ours) or
beside it received by a raw PULL thread, by a process the trainer never hears of, or by
a raw thread decoding into the same reservoir (`ingest_raw_put.RawPutSource`); each
against the workload alone on its core, interleaved."""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from typing import Any

import trainer_overhead as overhead
import zmq
from ingest_arms import KB
from ingest_raw_put import RawPutSource
from ingest_training import (
    distinct_fields,
    run_streamed,
    run_training,
    stream_client,
    streamed_sample,
)

PINNED_TARGET = 0.93  # step time alone / step time with a stream beside, pinned

RAW_PULL_CODE = r"""
import os, sys
import zmq
os.sched_setaffinity(0, {int(sys.argv[1])})
ctx = zmq.Context()
s = ctx.socket(zmq.PULL)
print(f"tcp://127.0.0.1:{s.bind_to_random_port('tcp://127.0.0.1')}", flush=True)
recv = s.recv
while True:  # receives and discards, until killed
    recv()
"""


def pin_process(cores: set[int]) -> None:
    """Pin every thread of this process (os.sched_setaffinity pins one thread) to
    `cores`; threads started later inherit it from the thread that starts them."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(int(tid), cores)


class RawPullThread:
    """A plain pyzmq PULL socket in this process, drained by a thread that discards
    what arrives: the stream received at no cost of ours (context manager)."""

    def __init__(self) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.RCVTIMEO, 50)
        self.endpoint = f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        recv = self.sock.recv
        while not self.stop.is_set():
            with contextlib.suppress(zmq.Again):
                recv()

    def __enter__(self) -> RawPullThread:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.sock.close(linger=0)
        self.ctx.term()


def pinned_rows(rounds: int, quick: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The workload on one core while a client streams 1 KB fields at 20k msgs/s from
    another (both pinned, their threads with them): trained on that stream (ours), and,
    to tell our cost from the machine's, beside the same stream received by a raw pyzmq
    PULL thread of the training process, or by a process on the client's core that the
    training process never hears of; each against the same workload alone on its core
    (pre-filled), interleaved."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return [], ["pinned rows skipped: they need 2 cores"]
    train_core, sim_core = cores[0], cores[1]
    nbytes, rate, capacity = KB, 20_000.0, overhead.N_SAMPLES
    steps = 200 if quick else 800
    samples = [{"u": u} for u in distinct_fields(nbytes, capacity)]
    out = tempfile.mkdtemp(prefix="mt-ingest-pinned-")
    runs: dict[str, list[float]] = {"alone": [], "ours": [], "raw": [], "apart": [], "rawput": []}
    cpu: dict[str, list[float]] = {k: [] for k in runs}  # steps per CPU second

    def prefilled() -> overhead.Prefilled:
        return overhead.Prefilled(samples)

    received: list[float] = []
    received_rawput: list[float] = []

    def beside(where: str) -> tuple[float, float]:
        """Steps/s and steps per CPU second of the pre-filled workload while a client
        streams to `where`."""
        client = stream_client(where, nbytes, rate, capacity, sim_core)
        try:
            clock = run_training(prefilled(), steps, out, r, streamed_sample, capacity)
        finally:
            client.kill()
            client.wait()
        return clock.steps / clock.seconds, clock.steps / clock.cpu_seconds

    pin_process({train_core})
    try:
        run_training(prefilled(), 50, out, 0, streamed_sample, capacity)
        for r in range(rounds):
            clock = run_training(
                overhead.Prefilled(samples), steps, out, r, streamed_sample, capacity
            )
            runs["alone"].append(clock.steps / clock.seconds)
            cpu["alone"].append(clock.steps / clock.cpu_seconds)
            speed, got, per_cpu = run_streamed(
                nbytes, rate, steps, out, r, capacity, False, sim_core
            )
            runs["ours"].append(speed)
            cpu["ours"].append(per_cpu)
            received.append(got)
            with RawPullThread() as raw:
                speed, per_cpu = beside(raw.endpoint)
                runs["raw"].append(speed)
                cpu["raw"].append(per_cpu)
            rawput = RawPutSource(distinct_fields(nbytes, capacity))
            client = stream_client(rawput.endpoint, nbytes, rate, capacity, sim_core)
            try:
                clock = run_training(rawput, steps, out, r, streamed_sample, capacity)
                runs["rawput"].append(clock.steps / clock.seconds)
                received_rawput.append(clock.received / clock.seconds)
                cpu["rawput"].append(clock.steps / clock.cpu_seconds)
            finally:
                client.kill()
                client.wait()
                rawput.stop()
            apart = subprocess.Popen(
                [sys.executable, "-c", RAW_PULL_CODE, str(sim_core)],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert apart.stdout is not None
                speed, per_cpu = beside(apart.stdout.readline().strip())
                runs["apart"].append(speed)
                cpu["apart"].append(per_cpu)
            finally:
                apart.kill()
                apart.wait()
    finally:
        pin_process(set(cores))
        shutil.rmtree(out, ignore_errors=True)
    rows = []
    label = f"pinned (core {train_core}), 1 KB at 20k msgs/s from core {sim_core}"
    for key, what, target in (
        ("ours", "ours", PINNED_TARGET),
        ("raw", "raw PULL thread", None),
        ("apart", "other process", None),
        ("rawput", "raw thread decoding into the same reservoir (a fairer baseline)", None),
    ):
        # wall time, and CPU time of this process (steps per CPU second: what the
        # trainer's core spends, which other processes on a shared machine disturb less)
        for data, unit, suffix in ((runs, "steps/s", ""), (cpu, "steps/cpu-s", ", CPU")):
            speed, alone = statistics.median(data[key]), statistics.median(data["alone"])
            rows.append(
                {
                    "case": f"{label}: {what}{suffix}",
                    "ours": round(speed, 1),
                    "baseline": round(alone, 1),
                    "unit": unit,
                    "ratio": round(speed / alone, 3),
                    "target": target,
                }
            )
    notes = [
        f"pinned: {statistics.median(received):,.0f} samples/s went into the trainer's buffer "
        f"(back-pressure holds the client at the trainer's draws); the raw PULL thread and "
        f"the other process take the client's full pace, {rate:,.0f} msgs/s",
        f"pinned: the fairer baseline's thread put {statistics.median(received_rawput):,.0f} "
        f"samples/s into the same reservoir (held back by its room, as ours)",
    ]
    return rows, notes
