"""The two arms of `ingest.py`'s throughput rows: ours (Client processes -> `Receiver`
-> FIFO buffer, drained as the training thread reads it) and the raw pyzmq baseline
(PUSH processes -> a PULL socket that discards, in a process of its own); each returns
the seconds for `n` messages and the receiving threads' CPU seconds, and appends the
receiving process's minor page faults per message to `FAULTS`.

The senders (`CLIENT_CODE`, `RAW_CODE`) start, print ``ready`` and wait for the go line
(`_spawn`, `_go`): the clock runs from the go signal to the last message in.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import reader
import zmq

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

KB, MB = 1 << 10, 1 << 20
INLINE_MAX = reader.INLINE_MAX

CLIENT_CODE = r"""
import sys, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning

endpoint, sim, nbytes, n, hwm, rate, reuse = sys.argv[1:8]
sim, nbytes, n, hwm, rate = int(sim), int(nbytes), int(n), int(hwm), float(rate)
# never written after the first send (valid in every array_reuse mode); filled, so that
# its pages are real memory (calloc'ed zeros may all map the kernel's zero page)
u = np.full(nbytes // 4, 1.0, np.float32)
c = Client({"u": ((nbytes // 4,), "float32")}, None, sim, [endpoint], array_reuse=reuse,
           tuning=ClientTuning(sndhwm=hwm))
print("ready", flush=True)
sys.stdin.readline()
send = c.send
if rate <= 0:
    for t in range(n):
        send(t, u=u)
    c.close()
else:  # paced, until killed
    start, t = time.perf_counter(), 0
    while True:
        due = int((time.perf_counter() - start) * rate) + 1
        while t < due:
            send(t, u=u)
            t += 1
        time.sleep(0.0005)
"""

RAW_CODE = r"""
import sys
import zmq

endpoint, nbytes, n, hwm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ctx = zmq.Context()
s = ctx.socket(zmq.PUSH)
s.setsockopt(zmq.SNDHWM, hwm)
s.connect(endpoint)
msg = bytes(nbytes)
print("ready", flush=True)
sys.stdin.readline()
if nbytes <= 65536:
    send = s.send
    for _ in range(n):
        send(msg)
else:
    for _ in range(n):
        s.send(msg, copy=False)
s.close(linger=-1)
ctx.term()
"""


def _spawn(code: str, args: list[Any]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"sender failed to start: {line!r}")
    return proc


def _go(procs: list[subprocess.Popen[str]]) -> float:
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    return t0


def _hwm(nbytes: int) -> int:
    return int(min(1000, max(4, (64 * MB) // nbytes)))


def _wire_bytes(nbytes: int) -> int:
    """Bytes of one DATA message of a 1-d float32 field named "u"."""
    return P.DATA_HEADER_BYTES + 8 + 1 + nbytes


def run_ours(
    nbytes: int, clients: int, n: int, reuse: str = "immediate", nonfinite: str = "refuse"
) -> tuple[float, float]:
    """Seconds to stream `n` messages (split over `clients`, with `array_reuse=reuse`)
    into the buffer, and the CPU seconds of the threads that ingest (the reader's, which
    pumps, and the receiver's) meanwhile; not ZeroMQ's I/O thread, which the raw receiver
    has too. `nonfinite`: the receiver's policy ("refuse", the default, checks every
    sample for NaN and Inf; "accept" does not). The minor page faults of this process
    meanwhile (ZeroMQ's I/O thread's too) go to `FAULTS` (see `faults_row`)."""
    hwm = _hwm(nbytes)
    buffer = FIFOBuffer(reader.buffer_capacity(nbytes))
    config = ReceiverConfig(expected_simulations=clients, rcvhwm=hwm, nonfinite=nonfinite)
    rec = Receiver(buffer, config=config)
    rec.start()
    ends: list[tuple[float, float]] = []

    def drain() -> None:
        cpu0 = time.thread_time()
        reader.drain(rec, buffer, nbytes)
        ends.append((time.perf_counter(), time.thread_time() - cpu0 + thread_cpu(rec)))

    consumer = threading.Thread(target=drain, daemon=True)
    procs = []
    try:
        per = [n // clients + (i < n % clients) for i in range(clients)]
        procs = [
            _spawn(CLIENT_CODE, [rec.endpoint, i + 1, nbytes, k, hwm, 0, reuse])
            for i, k in enumerate(per)
        ]
        consumer.start()
        cpu0 = thread_cpu(rec)
        faults0 = _minor_faults()
        t0 = _go(procs)
        consumer.join(600)
        FAULTS.append((_minor_faults() - faults0) / n)
        for p in procs:
            p.wait(60)
        put = rec.telemetry()["samples_put"]
        if put != n:
            raise RuntimeError(f"{put} samples put, expected {n}")
        return ends[0][0] - t0, ends[0][1] - cpu0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        buffer.close()
        rec.stop()


#: minor page faults per message of this process in each run of `run_ours` and `run_raw`,
#: in order: a page of a received frame faulted in again costs ZeroMQ's I/O thread, which
#: the CPU row leaves out (both receivers have one), yet it holds the throughput back
FAULTS: list[float] = []


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def thread_cpu(rec: Receiver) -> float:
    """CPU seconds of the receiver's thread so far."""
    assert rec._thread is not None and rec._thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(rec._thread.ident))


#: `run_raw_here` in a fresh interpreter, printing its figures and faults as JSON; with
#: a last argument 1, after the malloc thresholds a receiver of ours sets for the stream.
#: It imports the whole `ingest` benchmark (torch and the trainer with it, which
#: re-exports these names), as the raw process always has: its start is unchanged
RAW_RUN = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); import ingest; "
    "nbytes, clients, n, recycle = map(int, sys.argv[2:6]); "
    "recycle and ingest.recycle_frames(nbytes, "
    "(ingest.reader.buffer_capacity(nbytes) + ingest._hwm(nbytes) + 2) * nbytes); "
    "r = ingest.run_raw_here(nbytes, clients, n); print(json.dumps([*r, ingest.FAULTS[-1]]))"
)


def run_raw(nbytes: int, clients: int, n: int, recycle: bool = False) -> tuple[float, float]:
    """`run_raw_here` in a process of its own: a `Receiver` run before in this process
    sets malloc's thresholds for the whole process (`ReceiverConfig.recycle_frames`),
    and the raw baseline, a program that never heard of this library, must not inherit
    them (it would recycle its frames too). With `recycle`, it is given the thresholds
    ours sets for this stream (the like-for-like row). Its faults go to `FAULTS`."""
    here = str(Path(__file__).resolve().parent)
    args = [str(nbytes), str(clients), str(n), str(int(recycle))]
    out = subprocess.run(
        [sys.executable, "-c", RAW_RUN, here, *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the raw receiver failed ({out.returncode}):\n{out.stderr[-2000:]}")
    seconds, cpu, faults = json.loads(out.stdout.strip().splitlines()[-1])
    FAULTS.append(faults)
    return seconds, cpu


def run_raw_here(nbytes: int, clients: int, n: int) -> tuple[float, float]:
    """Seconds for `n` messages into a raw PULL socket of this process, and the
    receiving thread's CPU seconds (see `run_raw`)."""
    hwm = _hwm(nbytes)
    size = _wire_bytes(nbytes)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, hwm)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    procs = []
    try:
        per = [n // clients + (i < n % clients) for i in range(clients)]
        procs = [_spawn(RAW_CODE, [f"tcp://127.0.0.1:{port}", size, k, hwm]) for k in per]
        cpu0 = time.thread_time()
        faults0 = _minor_faults()
        t0 = _go(procs)
        recv = sock.recv
        if size <= INLINE_MAX + 100:
            for _ in range(n):
                recv()
        else:
            for _ in range(n):
                recv(copy=False)
        dt, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
        FAULTS.append((_minor_faults() - faults0) / n)
        for p in procs:
            p.wait(60)
        return dt, cpu
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        sock.close(linger=0)
        ctx.term()
