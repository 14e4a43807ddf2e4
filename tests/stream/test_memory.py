"""Memory stays flat while a long stream flows through a Receiver into a reservoir.

10**6 small samples (64 float32 each), streamed by `Client` subprocesses into a
`ReservoirBuffer` of 10,000 samples that a consumer thread keeps drawing from (so
every put evicts), with malloc's thresholds as `StreamSource(keep_freed_memory=True)`
sets them (the case where freed memory is kept, not returned): the process RSS
after the first 10**5 samples and at the end must differ by less than `RSS_BOUND`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from melissa_trainer.buffers import ReservoirBuffer
from melissa_trainer.stream.heap import keep_freed_memory
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = pytest.mark.e2e  # every test here starts a process

SAMPLES = int(os.environ.get("MELISSA_MEMORY_SAMPLES", "1000000"))
SENDERS = 2
WARMUP = SAMPLES // 10
CAPACITY = 10_000
RSS_BOUND = 64 << 20

SENDER_CODE = r"""
import sys
import numpy as np
from melissa_trainer.client import Client

endpoint, sim, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
u = np.arange(64, dtype=np.float32) + sim
with Client({"u": ((64,), "float32")}, {"p": float(sim)}, sim, [endpoint]) as client:
    send = client.send
    for t in range(steps):
        send(t, u=u)
"""


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_rss_flat_over_a_million_samples() -> None:
    # As StreamSource(keep_freed_memory=True) sets it (whatever ran before in this
    # process): malloc keeps freed memory instead of returning it, which must not grow.
    assert keep_freed_memory() or not sys.platform.startswith("linux")
    buffer = ReservoirBuffer(CAPACITY, seed=0)
    rec = Receiver(buffer, config=ReceiverConfig(expected_simulations=SENDERS))
    rec.start()
    assert rec.endpoint is not None
    drawn = [0]

    def consume() -> None:
        while batch := buffer.get_batch(64):
            drawn[0] += len(batch)
            time.sleep(0.0005)  # a training step's pace, not a spin holding the GIL

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    per_sender = [SAMPLES // SENDERS + (i < SAMPLES % SENDERS) for i in range(SENDERS)]
    procs: list[subprocess.Popen[bytes]] = []
    me = psutil.Process()
    started = time.perf_counter()
    try:
        for i, n in enumerate(per_sender):
            cmd = [sys.executable, "-c", SENDER_CODE, rec.endpoint, str(i + 1), str(n)]
            procs.append(subprocess.Popen(cmd))
        deadline = time.monotonic() + 360
        while rec.telemetry()["samples_put"] < WARMUP:
            assert time.monotonic() < deadline, rec.telemetry()
            rec.check()
            time.sleep(0.01)
        rss_start = me.memory_info().rss
        while not rec.ended:
            assert time.monotonic() < deadline, rec.telemetry()
            rec.check()
            time.sleep(0.05)
        consumer.join(30)
        assert not consumer.is_alive()
        rss_end = me.memory_info().rss
        elapsed = time.perf_counter() - started
        for p in procs:
            assert p.wait(30) == 0
        tel = rec.telemetry()
        assert tel["samples_put"] == SAMPLES
        assert tel["rejected"] == 0 and tel["duplicates"] == 0
        assert buffer.stats().evicted >= SAMPLES - 2 * CAPACITY
        growth = rss_end - rss_start
        print(
            f"\n{SAMPLES} samples in {elapsed:.1f} s ({SAMPLES / elapsed:,.0f}/s) from "
            f"{SENDERS} senders; RSS after {WARMUP}: {rss_start / 2**20:.1f} MiB, at the end: "
            f"{rss_end / 2**20:.1f} MiB (growth {growth / 2**20:+.1f} MiB); {drawn[0]} drawn"
        )
        assert growth < RSS_BOUND
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        buffer.close()
        rec.stop()
        consumer.join(5)
