"""C client: CPU time per send against plain libzmq, and end-to-end rate against Python.

CPU per send (`benchmarks/c/send_bench.c`, one process): N calls of `mt_send` of a
float32 field "u" (1 KB: batched, the client's default 64 KiB batches; 1 MB: two frames,
the array without a copy, `mt_set_reuse` "immediate", the default, and "next_send"),
against N calls of `zmq_send` of the same bytes (the field's one-frame DATA message,
header and payload) on a PUSH socket of its own with the client's options (SNDHWM,
LINGER), interleaved: ours, raw, ours, raw ... after a warm-up of each. A C drainer
process (`benchmarks/c/drain.c`) reads and discards both streams, so that no slow
reader holds the sender back, and counts the records it gets: an arm's clock stops when
all of its records have arrived. The figure is the sender's process CPU time
(CLOCK_PROCESS_CPUTIME_ID) per send: the calling thread, the client's flusher thread and
libzmq's I/O thread, which the client and zmq_send both hand their bytes to, so only the
whole process compares like with like. The calling thread's CPU time per send (what the
simulation's thread pays) is in the `_thread_cpu` rows. Medians over rounds; ratio =
baseline / ours (lower CPU is better, so higher is better), targets from the issue:
<= 1.5x the CPU of zmq_send at 1 KB (ratio >= 0.667), <= 1.1x at 1 MB (ratio >= 0.909).

End to end: client processes (1 or 4), C (`benchmarks/c/stream_client.c`) or Python
(`melissa_trainer.client.Client`, as in `benchmarks/ingest.py`), stream the same field
into a real `Receiver`, whose samples go into a FIFO buffer that a consumer thread drains
as `benchmarks/ingest.py` does; the clock runs from the go signal to the end of the
stream. C and Python alternate (C, Python, C, Python ...); medians; ratio = C / Python
in samples/s, target 1.0 (the issue: C clients reach at least the Python client's rate).

The library is built with CMake from `clients/c` (Release, into `--build-dir`, by
default a directory of this checkout's own under the system's temp dir, reused between
runs), the three programs with the C compiler (`$CC`, else cc) against it and libzmq.
Without cmake, pkg-config, a C compiler or libzmq the script says what is missing on
stderr and exits 77 (tests/benchmarks/test_benchmark_c_client.py then skips).

    python benchmarks/c_client.py            # a few minutes
    python benchmarks/c_client.py --quick    # shorter
    python benchmarks/c_client.py --json     # {"rows": [...]}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "c")]
import reader  # noqa: E402
from bench_programs import MissingTool, Programs, build  # noqa: E402
from report import add_flags, finish  # noqa: E402

from melissa_trainer.buffers import FIFOBuffer  # noqa: E402
from melissa_trainer.stream.receiver import Receiver  # noqa: E402
from melissa_trainer.stream.receiver_config import ReceiverConfig  # noqa: E402

KB, MB = 1 << 10, 1 << 20
LABELS = {KB: "1KB", MB: "1MB"}
CPU_TARGETS = {KB: round(1 / 1.5, 3), MB: round(1 / 1.1, 3)}
E2E_TARGET = 1.0
INLINE_MAX = reader.INLINE_MAX
BATCH_BYTES = 65536  # the client's default
SKIP_EXIT = 77  # a tool is missing: the caller may skip

PY_CLIENT = r"""
import sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning

endpoint, sim, nbytes, n, hwm, reuse = sys.argv[1:7]
sim, nbytes, n, hwm = int(sim), int(nbytes), int(n), int(hwm)
# never written after the first send; filled, so that its pages are real memory
u = np.full(nbytes // 4, 1.0, np.float32)
c = Client({"u": ((nbytes // 4,), "float32")}, None, sim, [endpoint], array_reuse=reuse,
           tuning=ClientTuning(sndhwm=hwm))
print("ready", flush=True)
sys.stdin.readline()
send = c.send
for t in range(n):
    send(t, u=u)
c.close()
"""


def hwm(nbytes: int) -> int:
    """ZMQ_SNDHWM (and the receiver's RCVHWM) for `nbytes` fields: as benchmarks/ingest.py,
    at most 64 MB queued."""
    return int(min(1000, max(4, (64 * MB) // nbytes)))


# -- CPU per send -------------------------------------------------------------------------


def run_send_bench(
    programs: Programs, nbytes: int, sends: int, rounds: int, reuse: str
) -> list[dict[str, Any]]:
    """One `send_bench` run against a fresh drainer: its per-arm, per-round records."""
    drain = programs.popen([programs.drain, str(hwm(nbytes))])
    try:
        assert drain.stdout is not None
        endpoints = json.loads(drain.stdout.readline() or "null")
        if not isinstance(endpoints, dict):
            raise RuntimeError(f"the drainer failed to start: {programs.stderr_of(drain)}")
        batch = BATCH_BYTES if nbytes <= INLINE_MAX else 0
        args = [endpoints["ours"], endpoints["raw"], endpoints["control"], nbytes, sends,
                rounds, hwm(nbytes), batch, reuse]  # fmt: skip
        out = programs.run([programs.send_bench, *map(str, args)], timeout=600)
        drain.wait(30)
        if drain.returncode != 0:
            raise RuntimeError(f"the drainer failed: {programs.stderr_of(drain)}")
    finally:
        programs.reap(drain)
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    if not records or records[-1] != {"done": True}:
        raise RuntimeError(f"send_bench ended early: {out[-500:]!r}")
    return records[:-1]


def _per_send(records: list[dict[str, Any]], arm: str, key: str) -> float:
    """The median over the rounds of `arm` of `key` per send, in microseconds."""
    return statistics.median(r[key] / r["sends"] for r in records if r["arm"] == arm) * 1e6


def cpu_rows(
    programs: Programs, rounds: int, quick: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """The CPU-per-send rows (process and calling thread) and notes (wall time)."""
    cases = [(KB, "immediate", 200_000), (MB, "immediate", 1000), (MB, "next_send", 1000)]
    if quick:
        cases = [(KB, "immediate", 20_000), (MB, "immediate", 100)]
    rows, notes = [], []
    for nbytes, reuse, sends in cases:
        records = run_send_bench(programs, nbytes, sends, rounds, reuse)
        for arm in ("ours", "raw"):
            if sum(r["arm"] == arm for r in records) != rounds:
                raise RuntimeError(f"send_bench gave {len(records)} records for {rounds} rounds")
        name = f"c_send_{LABELS[nbytes]}"
        name += "" if reuse == "immediate" else f"_{reuse}"
        for key, suffix, target in (
            ("process_cpu_s", "cpu", CPU_TARGETS[nbytes] if reuse == "immediate" else None),
            ("thread_cpu_s", "thread_cpu", None),
        ):
            ours, base = _per_send(records, "ours", key), _per_send(records, "raw", key)
            rows.append(
                {
                    "case": f"{name}_{suffix}",
                    "ours": round(ours, 3),
                    "baseline": round(base, 3),
                    "unit": "us/send",
                    "ratio": round(base / ours, 3),
                    "target": target,
                }
            )
        ours, base = _per_send(records, "ours", "wall_s"), _per_send(records, "raw", "wall_s")
        notes.append(
            f"{name}: wall time {ours:,.3f} us/send (mt_send) vs {base:,.3f} (zmq_send), "
            f"{sends:,} sends per arm and round"
        )
    return rows, notes


# -- end to end ---------------------------------------------------------------------------


def run_stream(programs: Programs, kind: str, nbytes: int, clients: int, n: int) -> float:
    """Seconds for `clients` processes of `kind` ("c" or "python") to stream `n` steps of
    `nbytes` (split between them) into a Receiver and its FIFO buffer, drained as in
    benchmarks/ingest.py."""
    buffer = FIFOBuffer(reader.buffer_capacity(nbytes))
    rec = Receiver(buffer, config=ReceiverConfig(expected_simulations=clients, rcvhwm=hwm(nbytes)))
    rec.start()
    ends: list[float] = []

    def drain() -> None:
        reader.drain(rec, buffer, nbytes)
        ends.append(time.perf_counter())

    consumer = threading.Thread(target=drain, daemon=True)
    procs = []
    try:
        per = [n // clients + (i < n % clients) for i in range(clients)]
        for i, k in enumerate(per):
            args = [rec.endpoint, i + 1, nbytes, k, hwm(nbytes), "immediate"]
            if kind == "c":
                command = [str(programs.stream_client), *map(str, args)]
            else:
                command = [sys.executable, "-c", PY_CLIENT, *map(str, args)]
            procs.append(programs.spawn_ready(command))
        consumer.start()
        t0 = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        consumer.join(600)
        if consumer.is_alive():
            raise RuntimeError(f"the stream of {kind} clients did not end in 600 s")
        for p in procs:
            if p.wait(60) != 0:
                raise RuntimeError(f"a {kind} client failed: {programs.stderr_of(p)}")
        put = rec.telemetry()["samples_put"]
        if put != n:
            raise RuntimeError(f"{put} samples put by {kind} clients, expected {n}")
        return ends[0] - t0
    finally:
        for p in procs:
            programs.reap(p)
        buffer.close()
        rec.stop()


def e2e_rows(programs: Programs, rounds: int, quick: bool) -> list[dict[str, Any]]:
    """C against Python clients, samples/s into the buffer, C and Python alternating."""
    counts = {KB: 20_000, MB: 200} if quick else {KB: 400_000, MB: 3000}
    rows = []
    for nbytes in (KB, MB):
        for clients in (1, 4):
            n = counts[nbytes]
            c_times, py_times = [], []
            for _ in range(rounds):
                c_times.append(run_stream(programs, "c", nbytes, clients, n))
                py_times.append(run_stream(programs, "python", nbytes, clients, n))
            ours, base = n / statistics.median(c_times), n / statistics.median(py_times)
            rows.append(
                {
                    "case": f"c_e2e_{LABELS[nbytes]}_x{clients}",
                    "ours": round(ours, 1),
                    "baseline": round(base, 1),
                    "unit": "samples/s",
                    "ratio": round(ours / base, 3),
                    "target": E2E_TARGET,
                }
            )
    return rows


def _checkout_key() -> str:
    """A short name for this checkout (its path), for the default build directory."""
    return hashlib.sha256(str(HERE.parent).encode()).hexdigest()[:10]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--no-e2e", action="store_true", help="only the CPU-per-send rows")
    parser.add_argument("--no-cpu", action="store_true", help="only the end-to-end rows")
    parser.add_argument(
        "--build-dir",
        type=Path,
        # one per checkout: a CMake build directory belongs to one source tree
        default=Path(tempfile.gettempdir()) / f"melissa-trainer-c-bench-{_checkout_key()}",
        help="where the library and the programs are built (reused)",
    )
    opts = parser.parse_args()
    rounds = opts.rounds or (3 if opts.quick else 7)  # 7: a median that holds on a noisy day
    try:
        programs = build(opts.build_dir)
    except MissingTool as e:
        print(f"c_client.py: {e}", file=sys.stderr)
        sys.exit(SKIP_EXIT)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    if not opts.no_cpu:
        rows, notes = cpu_rows(programs, rounds, opts.quick)
    if not opts.no_e2e:
        rows += e2e_rows(programs, rounds, opts.quick)
    title = (
        f"medians of {rounds} interleaved rounds; CPU rows: ratio = baseline / ours, "
        f"samples/s rows: ratio = ours / baseline"
    )
    finish(rows, title, 32, as_json=opts.json, notes=notes)


if __name__ == "__main__":
    main()
