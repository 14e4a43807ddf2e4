"""Ingest throughput: Client processes -> Receiver -> sample -> buffer, against raw pyzmq.

Ours: `melissa_trainer.client.Client` processes (1 or 4) send one float32 field per
time step into a `Receiver`, whose samples go into a FIFO buffer that a consumer thread
drains in batches (fields of up to 64 KB, which clients batch and the FIFO holds as
blocks, with `get_block`, as the stream dataset takes its default batches; larger ones
with `get_batch`, without a copy).
Baseline: plain pyzmq PUSH processes sending the same message sizes (one frame
of header + payload bytes; ``copy=False`` above 64 KB) to a PULL socket that receives
and discards (``recv()``, or ``recv(copy=False)`` for large messages), in a process of
its own (ours, run before in this one, sets malloc's thresholds process-wide: see
`ReceiverConfig.recycle_frames`; the raw program must not inherit them). The clock runs
from the go signal to the last message in (ours: the end of stream). A and B alternate
(A B A B ...) and medians are compared; ratio = ours / baseline (higher is better).
Above 64 KB, where arrays leave without a copy, ours runs once per round in each
``Client(array_reuse=...)`` mode: "immediate" (the default: each `send` returns once
ZeroMQ has released the array, which the raw sender never waits for), "next_send"
(released at the next `send`) and "never" (the array is handed over, as the raw
sender's immutable bytes are: the like-for-like contract). Beside each throughput row, the
CPU per message of the threads that receive it, and the minor page faults per message of
the receiving process (ZeroMQ's I/O thread faulting in the pages of each new frame, which
the CPU row leaves out: the cause of issue 42's 0.49 one day and 0.69 the next); and,
above 64 KB, ours against the raw receiver given the malloc thresholds ours sets for its
frames (`ReceiverConfig.recycle_frames`): the like-for-like figure, as raw with glibc's
defaults faults in most pages of its frames again too.

Training under ingest: the `benchmarks/trainer_overhead.py` workload (model, batch,
reservoir, Adam) trained on what one client process streams at a fixed rate (20k
msgs/s of 1 KB, or 200 MB/s of 1 MB fields) into a `StreamSource` of the training
process (each field read as the workload's 3 inputs and 1024 targets), against the
same workload on a pre-filled in-process source, without ingest (both with glibc's
malloc as it is, or both after `keep_freed_memory()` with ``--keep-freed-memory``, the
streamed runs' StreamSource then setting it too). Steps/s after a 50-step warm-up.
The reservoir evicts only samples already drawn (no sample is lost), so the stream can
enter no faster than the trainer draws (steps/s x 64): where that is below the
client's pace, the client is held back by back-pressure, and the notes under the table
give the rate that did enter.

Pinned (Linux, 2 cores or more): the same workload with this process (all its threads:
the receiver's and ZeroMQ's too) on one core and the client streaming 1 KB fields at
20k msgs/s on another, against the same workload alone on its core (pre-filled);
target: ours >= 0.93x (step time alone / step time with the stream). Two more rows
tell our cost from the machine's, against the same baseline: the same client streaming
into a raw pyzmq PULL thread of the training process (receiving, none of our ingest),
and into a process on the client's core that the trainer never hears of (memory
bandwidth and shared caches only). The raw receivers take the client's full pace; ours
holds it at the trainer's draws. A fourth row, a fairer baseline than the raw PULL
thread for ours: a raw thread of the training process that decodes each BATCH and puts
its samples into the same (columnar) reservoir, blocking for room
(`ingest_raw_put.RawPutSource`: none of our dedup, ledger or checkpoint record).

    python benchmarks/ingest.py            # a few minutes
    python benchmarks/ingest.py --quick    # shorter
    python benchmarks/ingest.py --json     # {"rows": [...]}
    python benchmarks/ingest.py --keep-freed-memory   # malloc keeps freed frames
    python benchmarks/ingest.py --only-pinned          # the pinned rows only
    python benchmarks/ingest.py --sizes 1MB --clients 1 --no-training --no-pinned
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zmq

from melissa_trainer import Hook, OnlineTrainer, StreamSource, TrainingArguments
from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.common.json_output import to_json
from melissa_trainer.stream.heap import keep_freed_memory, recycle_frames
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reader  # noqa: E402
import trainer_overhead as overhead  # noqa: E402
from ingest_raw_put import RawPutSource  # noqa: E402
from report import print_rows  # noqa: E402

KB, MB = 1 << 10, 1 << 20
SIZES = [(KB, "1 KB"), (64 * KB, "64 KB"), (MB, "1 MB"), (8 * MB, "8 MB")]
TARGETS = {KB: 0.5, MB: 0.85}
TRAIN_TARGET = 0.85
PINNED_TARGET = 0.93  # step time alone / step time with a stream beside, pinned
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
#: a last argument 1, after the malloc thresholds a receiver of ours sets for the stream
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


def ingest_rows(
    rounds: int,
    quick: bool,
    sizes: list[str] | None = None,
    clients_of: tuple[int, ...] = (1, 4),
    reuse: list[str] | None = None,
    nonfinite: str = "refuse",
) -> list[dict[str, Any]]:
    """The throughput rows of the sizes labelled `sizes` (all by default; "1 KB" may be
    written "1KB") with each number of clients of `clients_of`, above 64 KB in the
    `array_reuse` modes `reuse` (all three by default), the receiver's policy for
    non-finite values `nonfinite`."""
    counts = {KB: 800_000, 64 * KB: 20_000, MB: 3000, 8 * MB: 400}  # steady state
    if quick:
        counts = {k: max(v // 5, 40) for k, v in counts.items()}
    rows = []
    wanted = None if sizes is None else {x.replace(" ", "") for x in sizes}
    for nbytes, label in SIZES:
        if wanted is not None and label.replace(" ", "") not in wanted:
            continue
        # above INLINE_MAX arrays leave without a copy: each array_reuse mode
        every = ["immediate", "next_send", "never"]
        modes = (reuse or every) if nbytes > INLINE_MAX else ["immediate"]
        for clients in clients_of:
            n = counts[nbytes]
            ours: dict[str, list[float]] = {m: [] for m in modes}
            ours_cpu: dict[str, list[float]] = {m: [] for m in modes}
            ours_faults: dict[str, list[float]] = {m: [] for m in modes}
            base, base_cpu, base_faults, recycled = [], [], [], []
            for _ in range(rounds):
                for mode in modes:
                    seconds, cpu = run_ours(nbytes, clients, n, mode, nonfinite)
                    ours[mode].append(seconds)
                    ours_cpu[mode].append(cpu)
                    ours_faults[mode].append(FAULTS[-1])
                seconds, cpu = run_raw(nbytes, clients, n)
                base.append(seconds)
                base_cpu.append(cpu)
                base_faults.append(FAULTS[-1])
                if nbytes > INLINE_MAX:  # frames of their own: raw with ours' thresholds
                    recycled.append(run_raw(nbytes, clients, n, recycle=True)[0])
            t_base, cpu_base = statistics.median(base), statistics.median(base_cpu)
            for mode in modes:
                t_ours, cpu_ours = statistics.median(ours[mode]), statistics.median(ours_cpu[mode])
                case = f"{label} x{clients} client{'s' if clients > 1 else ''}"
                case += f", reuse={mode}" if nbytes > INLINE_MAX else ""
                case += "" if nonfinite == "refuse" else f", nonfinite={nonfinite}"
                rows += _throughput_rows(case, nbytes, n / t_ours, n / t_base)
                rows.append(
                    {  # what a message costs the threads that receive it (not ZeroMQ's)
                        "case": f"{case} (CPU us/msg, receiving threads)",
                        "ours": round(cpu_ours / n * 1e6, 2),
                        "baseline": round(cpu_base / n * 1e6, 2),
                        "unit": "us/msg",
                        "ratio": round(cpu_base / cpu_ours, 3),
                        "target": None,
                    }
                )
                rows.append(faults_row(case, ours_faults[mode], base_faults))
                if recycled:  # like for like: both receivers recycle their frames
                    t_same = statistics.median(recycled)
                    rows.append(
                        {
                            "case": f"{case} (msgs/s, raw with the same malloc thresholds)",
                            "ours": round(n / t_ours, 1),
                            "baseline": round(n / t_same, 1),
                            "unit": "msgs/s",
                            "ratio": round(t_same / t_ours, 3),
                            "target": None,
                        }
                    )
    return rows


def faults_row(case: str, ours: list[float], base: list[float]) -> dict[str, Any]:
    """The minor page faults per message of the receiving process (medians): a frame's
    memory faulted in again for each message shows here (256 per MiB) and not in the
    CPU row. Ratio (baseline + 1) / (ours + 1): 0 faults are no division by zero."""
    a, b = statistics.median(ours), statistics.median(base)
    return {
        "case": f"{case} (minor page faults/msg, receiving process)",
        "ours": round(a, 2),
        "baseline": round(b, 2),
        "unit": "faults/msg",
        "ratio": round((b + 1) / (a + 1), 3),
        "target": None,
    }


def _throughput_rows(case: str, nbytes: int, msgs_o: float, msgs_b: float) -> list[dict[str, Any]]:
    """The msgs/s row (with the issue's target) and the GB/s row of one case."""
    gb = _wire_bytes(nbytes) / 1e9
    ratio = round(msgs_o / msgs_b, 3)
    return [
        {
            "case": f"{case} (msgs/s)",
            "ours": round(msgs_o, 1),
            "baseline": round(msgs_b, 1),
            "unit": "msgs/s",
            "ratio": ratio,
            "target": TARGETS.get(nbytes),
        },
        {
            "case": f"{case} (GB/s)",
            "ours": round(msgs_o * gb, 3),
            "baseline": round(msgs_b * gb, 3),
            "unit": "GB/s",
            "ratio": ratio,
            "target": None,
        },
    ]


STREAM_CLIENT = r"""
import os, sys, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning, fetch_endpoints
_DISTINCT_FIELDS
where, (nbytes, count, core), rate = sys.argv[1], map(int, sys.argv[2:5]), float(sys.argv[5])
if core >= 0:  # this process and its threads (ZeroMQ's too) on that core only
    os.sched_setaffinity(0, {core})
fields = distinct_fields(nbytes, count)  # the pre-filled run's samples, cycled
endpoints = [where] if where.startswith("tcp://") else fetch_endpoints(where, 60)
c = Client({"u": ((nbytes // 4,), "float32")}, None, 1, endpoints,
           tuning=ClientTuning(sndhwm=_HWM))
start, t = time.perf_counter(), 0
while True:  # paced, until killed
    due = int((time.perf_counter() - start) * rate) + 1
    while t < due:
        c.send(t, u=fields[t % count])
        t += 1
    time.sleep(0.0005)
"""


def distinct_fields(nbytes: int, count: int) -> list[np.ndarray]:
    """`count` distinct random float32 fields of `nbytes`: the data of both training
    runs (the same values, so that both train alike: one field sent again and again
    would drive Adam's second moments into float32 subnormals, which are slow)."""
    rng = np.random.default_rng(nbytes)
    return [rng.standard_normal(nbytes // 4).astype(np.float32) for _ in range(count)]


class StepClock(Hook):
    """Times the steps after the first `warmup` (start-up and the first fill excluded),
    in wall time and in this process's CPU time (all its threads), and counts the
    samples the source put into the buffer meanwhile."""

    def __init__(self, warmup: int, source: Any) -> None:
        self.warmup, self.source = warmup, source
        self.start, self.steps, self.seconds, self.received = 0.0, 0, 0.0, 0.0
        self.cpu_start, self.cpu_seconds = 0.0, 0.0

    def _put(self) -> float:
        telemetry = getattr(self.source, "telemetry", None)
        return float(telemetry().get("samples_put", 0.0)) if telemetry is not None else 0.0

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if state.global_step == self.warmup:
            self.start, self.received = time.perf_counter(), -self._put()
            self.cpu_start = time.process_time()

    def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
        self.steps = state.global_step - self.warmup
        self.seconds = time.perf_counter() - self.start
        self.cpu_seconds = time.process_time() - self.cpu_start
        self.received += self._put()


def streamed_sample(s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """A streamed field as the `trainer_overhead` workload's (3 inputs, 1024 targets)."""
    u = torch.from_numpy(s["u"])
    return u[:3], u[:1024] if u.numel() >= 1024 else u.repeat(1024 // u.numel())


def run_training(
    source: Any, steps: int, out: str, seed: int, process: Any, capacity: int
) -> StepClock:
    """The `trainer_overhead` workload (model, batch, Adam, a reservoir of `capacity`)
    fed by `source`, timed over `steps` steps after a warm-up of 50."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()
    args = TrainingArguments(
        output_dir=out,
        batch_size=overhead.BATCH,
        buffer="reservoir",
        sample_to_insert_ratio=0,  # no rate limit: what this measured before issue 30's defaults
        buffer_size=capacity,
        watermark=overhead.BATCH,
        max_steps=steps + 50,
        save_at_end=False,
        seed=seed,
        disable_progress_bar=True,
        logging_steps=10_000,
    )
    model = overhead.make_model(seed)
    clock = StepClock(50, source)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.Adam(model.parameters(), lr=1e-4),
        train_source=source,
        process_sample=process,
        hooks=[clock],
    )
    # every arm starts from a collected heap: the set-up garbage of the runs before
    # otherwise leaves a full collection due (150-190 ms over ~320k objects), which
    # lands in whichever timed window allocates fastest (a streamed one: issue 42's
    # pinned row, docs/measured.md "Fifth round")
    gc.collect()
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    if clock.steps != steps:
        raise RuntimeError(f"the run stopped after {clock.steps} of {steps} timed steps")
    return clock


def stream_client(
    where: str, nbytes: int, rate: float, count: int, core: int | None = None
) -> subprocess.Popen[bytes]:
    """A client process streaming `count` distinct fields of `nbytes` at `rate` msgs/s,
    until killed, to a rendezvous directory or a ``tcp://`` endpoint; pinned to `core`
    (with its threads) if given."""
    code = STREAM_CLIENT.replace("_HWM", str(_hwm(nbytes)))
    code = code.replace("_DISTINCT_FIELDS", inspect.getsource(distinct_fields))
    args = [where, str(nbytes), str(count), str(-1 if core is None else core), str(rate)]
    return subprocess.Popen([sys.executable, "-c", code, *args])


def run_streamed(
    nbytes: int,
    rate: float,
    steps: int,
    out: str,
    seed: int,
    capacity: int,
    keep: bool,
    client_core: int | None = None,
) -> tuple[float, float, float]:
    """The workload trained on what one client streams at `rate` msgs/s of `nbytes`
    (received in this process; the client pinned to `client_core` if given); returns
    (steps/s, samples/s received, steps per CPU second of this process)."""
    rendezvous = Path(out) / f"rendezvous-{seed}-{nbytes}"
    shutil.rmtree(rendezvous, ignore_errors=True)
    proc = stream_client(str(rendezvous), nbytes, rate, capacity, client_core)
    source = StreamSource(
        ReceiverConfig(rendezvous_dir=rendezvous, rcvhwm=_hwm(nbytes)), keep_freed_memory=keep
    )

    def end_stream_if_client_dies() -> None:  # the client runs until killed
        proc.wait()
        source.finish(wait=False)

    threading.Thread(target=end_stream_if_client_dies, daemon=True).start()
    try:
        clock = run_training(source, steps, out, seed, streamed_sample, capacity)
        if proc.poll() is not None:
            raise RuntimeError(f"the streaming client exited early ({proc.returncode})")
    finally:
        proc.kill()
        proc.wait()
    return (
        clock.steps / clock.seconds,
        clock.received / clock.seconds,
        clock.steps / clock.cpu_seconds,
    )


def training_rows(rounds: int, quick: bool, keep: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The workload trained on a stream, against the same workload (same sample size,
    same `streamed_sample`) on a pre-filled source: the difference is the ingest."""
    steps = 200 if quick else 800
    if keep:  # process-wide (melissa_trainer.stream.heap): before both kinds of run
        keep_freed_memory()
    out = tempfile.mkdtemp(prefix="mt-ingest-")
    rows, notes = [], []
    try:
        for nbytes, rate, label, capacity in (
            (KB, 20_000.0, "1 KB at 20k msgs/s", overhead.N_SAMPLES),
            (MB, 200.0, "1 MB at 200 MB/s", 512),  # 512 MB of samples at most
        ):
            # distinct samples, as many as the reservoir holds: the same memory traffic
            samples = [{"u": u} for u in distinct_fields(nbytes, capacity)]
            # the thresholds the streamed run's receiver sets (process-wide: its
            # `ReceiverConfig.recycle_frames`, at the first HELLO), before both kinds of
            # run, not from the first streamed run on
            recycle_frames(nbytes, (capacity + _hwm(nbytes) + 2) * nbytes)
            run_training(overhead.Prefilled(samples), 50, out, 0, streamed_sample, capacity)
            plain, streamed, received = [], [], []
            for r in range(rounds):
                source = overhead.Prefilled(samples)
                clock = run_training(source, steps, out, r, streamed_sample, capacity)
                plain.append(clock.steps / clock.seconds)
                speed, got, _ = run_streamed(nbytes, rate, steps, out, r, capacity, keep)
                streamed.append(speed)
                received.append(got)
            a, b = statistics.median(streamed), statistics.median(plain)
            rows.append(
                {
                    "case": f"training on a {label} stream",
                    "ours": round(a, 1),
                    "baseline": round(b, 1),
                    "unit": "steps/s",
                    "ratio": round(a / b, 3),
                    "target": TRAIN_TARGET,
                }
            )
            draws = a * overhead.BATCH
            notes.append(
                f"{label}: {statistics.median(received):,.0f} samples/s went into the "
                f"buffer during the timed steps (the client's pace: {rate:,.0f}/s; the "
                f"trainer drew {draws:,.0f} samples/s, and a reservoir evicts only drawn "
                f"samples: a faster client is held back, never dropped)"
            )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return rows, notes


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--no-training", action="store_true", help="skip training rows")
    parser.add_argument("--no-ingest", action="store_true", help="only the training rows")
    parser.add_argument("--no-pinned", action="store_true", help="skip the pinned rows")
    parser.add_argument("--sizes", help="throughput rows of these sizes only, e.g. 1KB,1MB")
    parser.add_argument("--clients", help="throughput rows with these client counts, e.g. 1")
    parser.add_argument("--only-pinned", action="store_true", help="only the pinned rows")
    parser.add_argument(
        "--reuse", help="throughput rows above 64 KB in these array_reuse modes, e.g. immediate"
    )
    parser.add_argument(
        "--nonfinite",
        choices=["refuse", "accept"],
        default="refuse",
        help="the receiver's policy in the throughput rows (refuse, the default, checks "
        "every sample for NaN and Inf; accept does not)",
    )
    parser.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="glibc malloc keeps freed memory (StreamSource(keep_freed_memory=True))",
    )
    opts = parser.parse_args()
    rounds = opts.rounds or (3 if opts.quick else 7)  # 7: a median that holds on a noisy day
    torch.set_num_threads(1)
    only = opts.only_pinned
    sizes = opts.sizes.split(",") if opts.sizes else None
    clients = tuple(int(c) for c in opts.clients.split(",")) if opts.clients else (1, 4)
    reuse = opts.reuse.split(",") if opts.reuse else None
    rows = (
        []
        if opts.no_ingest or only
        else ingest_rows(rounds, opts.quick, sizes, clients, reuse, opts.nonfinite)
    )
    notes: list[str] = []
    if not (opts.no_training or only):
        train, notes = training_rows(rounds, opts.quick, opts.keep_freed_memory)
        rows += train
    if not opts.no_pinned and hasattr(os, "sched_setaffinity"):
        pinned, more = pinned_rows(rounds, opts.quick)
        rows += pinned
        notes += more
    if opts.json:
        print(to_json({"rows": rows}))
        return
    print_rows(rows, f"medians of {rounds} interleaved rounds; ratio = ours / baseline", 64)
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
