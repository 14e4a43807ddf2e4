"""Fan-in: the receiver's CPU per sample with 1 to 256 simulations connected, and its
memory per connected simulation.

CPU: one real `Receiver` in a process of its own, its FIFO buffer drained by a consumer
thread that pumps it (`benchmarks/reader.py`, as the training thread does), receives
from N client processes (N = 1, 16, 64, 256), each a simulation: a real `Client` with
its own id that says HELLO, sends its steps of one float32 field (1 KB or 1 MB) and says
BYE. Clients are paced so that the aggregate rate is the same at every N (1 KB: 2,000
samples/s; 1 MB: 200 samples/s, 200 MB/s; the receiver then uses a fraction of a core,
so the cost compares like with like): simulation i sends its j-th step at
``start + (i + j N) / rate``, on the system-wide monotonic clock. What is measured is
the receiver process's CPU time (CLOCK_PROCESS_CPUTIME_ID: the Python threads, i.e. the
consumer's pumps, which ingest, the receiver's thread, which takes over when pumps
stop, an idle main thread; and libzmq's I/O thread), from the start (HELLOs done) to
the end of the stream (every BYE in, every sample in the buffer), per sample put into
the buffer (the rows with the target) and per MB received; and per sample over the
middle half of the stream (from 1/4 to 3/4 of its planned length: no connection,
HELLO, BYE nor disconnection there, only the per-message cost; target None). Wall time
is not the figure: the machine has 2 cores shared with the clients. Under the table:
the shares of the pumping thread (the consumer: its pumps ingest, so this is the
receiver's data path; its ``time.thread_time`` and ``/proc/self/task/TID/schedstat``)
and of libzmq's threads (``schedstat`` of the ``ZMQbg/*`` threads), the rest being the
receiver's own thread (idle while pumps come) and the main thread (waiting).

Clients do not batch here (``ClientTuning(batch_bytes=0)``): every sample is one
ZeroMQ message at every N, so per message and per sample are the same figure. With the
default batching a client coalesces the samples of one ``batch_delay`` (20 ms): one
client at 2,000 samples/s sends ~40 per message, 256 clients at 8 samples/s each send
one; the informational row "client batching on" shows what that does per sample.

The process pool is started once (forked, numpy and pyzmq imported, no ZeroMQ context
yet) and reused: each round, the first N workers each run one new simulation. A round
runs N = 1 and every other N in turn (1, 16, 64, 256, 1, 16, ...); medians over rounds;
each row's baseline is the N = 1 median of the same run; ratio = cost at N=1 / cost at
N (higher is better), target 0.83 (the issue: cost at N=256 <= 1.2x cost at N=1).

Memory: the receiver process's RSS (VmRSS) idle, and with 1,000 peers connected from 10
processes of 100 sockets each: (a) bare ZeroMQ connections (PUSH sockets, no HELLO):
libzmq's per-peer cost (its session, pipe, engine and their buffers); (b) in a fresh
receiver process, 1,000 idle simulations (`Client`: HELLO and one 1 KB step each, no
BYE): RSS per simulation, the receiver's Python allocations per simulation (tracemalloc:
`StepLedger` and the ingest's per-simulation entries) and the dedup record per
simulation (bytes of JSON in ``state_dict()``). The processes raise their soft limit
of open files (RLIMIT_NOFILE) to the hard limit.

    python benchmarks/fan_in.py                 # about 4 minutes
    python benchmarks/fan_in.py --quick         # N = 1, 16, 64, shorter rounds
    python benchmarks/fan_in.py --json          # {"rows": [...]}
    python benchmarks/fan_in.py --sizes 1KB --clients 1,256 --rounds 7
    python benchmarks/fan_in.py --ceiling       # also streams as fast as clients send
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fan_in_procs import (  # noqa: E402
    KB,
    MB,
    MEMORY_FIELD,
    Pool,
    client_main,
    raise_fd_limit,
    receiver_main,
    recv_json,
    send_json,
)
from reader import INLINE_MAX  # noqa: E402
from report import add_flags, finish  # noqa: E402

LABELS = {KB: "1 KB", MB: "1 MB"}
RATES = {KB: 2000.0, MB: 200.0}  # aggregate samples/s, the same at every N
TARGET = 0.83  # cost at N=1 / cost at N=256 >= 1 / 1.2
IDLE_PEERS, PEER_PROCESSES = 1000, 10  # idle simulations, from this many processes


# -- the controller -----------------------------------------------------------------------


def run_round(
    receiver: Pool, clients: Pool, nbytes: int, k: int, total: int, rate: float, batch: bool,
    sim0: int,
) -> dict[str, float]:  # fmt: skip
    """One stream of `total` samples of `nbytes` from `k` simulations (ids from `sim0`) at
    the aggregate `rate` (samples/s; 0: as fast as they can): the receiver's figures, and
    the latest any client's step left ("late", seconds)."""
    steps = [total // k + (i < total % k) for i in range(k)]
    (endpoint,) = receiver.ask([{"op": "open", "sims": k, "nbytes": nbytes}])
    hello = {"op": "hello", "endpoint": endpoint, "nbytes": nbytes, "batch": batch}
    clients.ask([hello | {"sim": sim0 + i} for i in range(k)])
    # Connections lost to the listen backlog (libzmq's ZMQ_BACKLOG, 100) are retried
    # after a SYN timeout of 1 s or more: the clock starts once every HELLO is in.
    deadline = time.monotonic() + 60
    while receiver.ask([{"op": "hellos"}])[0] < k:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not all of {k} simulations said HELLO in 60 s")
        time.sleep(0.02)
    start = time.monotonic() + 0.05
    seconds = total / rate if rate > 0 else 0.0
    send_json(receiver.conns[0], {"op": "measure", "start": start, "seconds": seconds})
    # the first step leaves 50 ms after the receiver's clock started
    go = {"op": "go", "start": start + 0.05, "every": k, "rate": rate}
    late = clients.ask([go | {"first": i, "steps": steps[i]} for i in range(k)], 600)
    out: dict[str, float] = recv_json(receiver.conns[0], 600)
    if out["samples_put"] != total:
        raise RuntimeError(f"{out['samples_put']} samples put, expected {total}")
    return out | {"late": max(late)}


def _cost_rows(
    label: str,
    k: int,
    ours: list[dict[str, float]],
    base: list[dict[str, float]],
    target: float | None,
    suffix: str = "",
) -> list[dict[str, Any]]:
    """The rows of `k` clients against 1 client (medians): CPU per sample over the whole
    stream (the target's), per MB, and per sample in the stream's middle half."""
    rows = []
    for what, cpu, key, unit, scale in (
        ("sample", "process", "samples_put", "µs", 1e6),
        ("MB", "process", "bytes", "µs/MB", 1e6 * MB),
        ("sample, middle half", "steady_process", "steady_samples", "µs", 1e6),
    ):
        a = statistics.median(r[cpu] / r[key] for r in ours) * scale
        b = statistics.median(r[cpu] / r[key] for r in base) * scale
        rows.append({
            "case": f"{label} fields, N={k} clients{suffix}: receiver CPU per {what}",
            "ours": round(a, 3), "baseline": round(b, 3), "unit": unit,
            "ratio": round(b / a, 3), "target": target if what == "sample" else None,
        })  # fmt: skip
    return rows


def fanin_rows(
    receiver: Pool, clients: Pool, sizes: list[int], ns: list[int], rounds: int, seconds: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """The CPU rows of each size and N > 1 against N = 1, and the notes on each arm."""
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    sim = 1
    for nbytes in sizes:
        arms = [(k, False) for k in ns]
        if nbytes <= INLINE_MAX:  # what client batching does to the per-sample cost
            arms += [(1, True), (ns[-1], True)]
        got: dict[tuple[int, bool], list[dict[str, float]]] = {arm: [] for arm in arms}
        rate = RATES[nbytes]
        for _ in range(rounds):
            for k, batch in arms:
                out = run_round(
                    receiver, clients, nbytes, k, round(rate * seconds), rate, batch, sim
                )
                got[(k, batch)].append(out)
                sim += k
        label = LABELS[nbytes]
        for k in ns[1:]:
            rows += _cost_rows(label, k, got[(k, False)], got[(1, False)], TARGET)
        if (1, True) in got:
            kmax = ns[-1]
            rows += _cost_rows(label, kmax, got[(kmax, True)], got[(1, True)], None,
                               ", client batching on")[:1]  # fmt: skip
        for (k, batch), rs in got.items():
            keys = ("process", "zmq", "pump", "wall", "samples_put", "messages", "late")
            m = {key: statistics.median(r[key] for r in rs) for key in keys}
            steady = statistics.median(r["steady_process"] / r["steady_samples"] for r in rs)
            notes.append(
                f"{label} N={k}{' batched' if batch else ''}: {m['samples_put'] / m['wall']:,.0f}"
                f" samples/s in {m['messages'] / m['wall']:,.0f} msgs/s, receiver CPU "
                f"{m['process'] / m['wall']:.0%} of a core ({m['pump'] / m['process']:.0%} in "
                f"the pumping thread, {m['zmq'] / m['process']:.0%} in libzmq's), "
                f"{m['process'] / m['messages'] * 1e6:,.1f} µs/message, {steady * 1e6:,.1f} µs/"
                f"sample in the middle half (no HELLO, BYE, disconnection); "
                f"clients' latest step {m['late'] * 1e3:,.1f} ms behind schedule"
            )
    return rows, notes


def ceiling_notes(receiver: Pool, clients: Pool, sizes: list[int]) -> list[str]:
    """One receiver's rate with 1 and 4 simulations sending as fast as they can (1 KB also
    batched), the clients sharing the 2 cores with the receiver: where the receiver's
    CPU stays under a core, the clients set the rate, and 1 / (CPU per sample) is what
    a core of the receiver's would sustain."""
    notes = []
    arms = [(KB, 1, False), (KB, 4, False), (KB, 1, True), (MB, 1, False), (MB, 4, False)]
    for nbytes, k, batch in (arm for arm in arms if arm[0] in sizes):
        total = (300_000 if batch else 100_000) if nbytes <= INLINE_MAX else 3000
        r = run_round(receiver, clients, nbytes, k, total, 0.0, batch, 10**8 + len(notes) * 10**6)
        cpu, wall, n = r["process"], r["wall"], r["samples_put"]
        notes.append(
            f"ceiling, {LABELS[nbytes]} x{k} unpaced{', batched' if batch else ''}: "
            f"{n / wall:,.0f} samples/s, {r['bytes'] / wall / MB:,.0f} MB/s, receiver CPU "
            f"{cpu / wall:.0%} of a core, {cpu / n * 1e6:,.1f} µs/sample "
            f"(1 / that: {n / cpu:,.0f} samples/s per core)"
        )
    return notes


#: seconds the receiver is left to settle before a memory probe (`--settle`)
SETTLE = 1.0


def _wait_for(receiver: Pool, done: Any, what: str, timeout: float = 120.0) -> dict[str, Any]:
    """Probe the receiver until `done(probe)`, then once more after `SETTLE` seconds."""
    deadline = time.monotonic() + timeout
    while not done(probe := receiver.ask([{"op": "probe"}])[0]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: still {probe} after {timeout} s")
        time.sleep(0.2)
    time.sleep(SETTLE)
    return dict(receiver.ask([{"op": "probe"}])[0])


def idle_peers(
    clients: Pool, n: int, simulations: bool, junk: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fresh receiver process, probed idle and with `n` peers connected
    (simulations with HELLO and one step, or bare connections, with `junk` each having
    sent one message that is not protocol)."""
    receiver = Pool(1, receiver_main)
    try:
        if simulations:
            receiver.ask([{"op": "trace"}])
        if junk:
            receiver.ask([{"op": "quiet"}])
        (endpoint,) = receiver.ask([{"op": "open", "sims": None, "nbytes": MEMORY_FIELD}])
        before = _wait_for(receiver, lambda p: True, "idle receiver")
        per = n // PEER_PROCESSES
        cmds = [{"op": "peers", "endpoint": endpoint, "n": per, "junk": junk,
                 "sim": 10**9 + i * per if simulations else None}
                for i in range(PEER_PROCESSES)]  # fmt: skip
        clients.ask(cmds)
        if simulations:
            ready = lambda p: p["waiting"] == n and p["samples_put"] == n  # noqa: E731
        elif junk:
            ready = lambda p: p["rejected"] == n  # noqa: E731
        else:
            ready = lambda p: p["fds"] >= before["fds"] + n  # noqa: E731
        after = _wait_for(receiver, ready, f"{n} peers")
        return before, after
    finally:  # the simulations' BYEs are delivered before the receiver goes
        clients.ask([{"op": "release"}] * PEER_PROCESSES)
        receiver.close()


def memory_rows(clients: Pool, n: int) -> tuple[list[dict[str, Any]], list[str]]:
    """RSS with `n` idle simulations, and per simulation against a bare connection."""
    bare0, bare1 = idle_peers(clients, n, simulations=False)
    junk0, junk1 = idle_peers(clients, n, simulations=False, junk=True)
    sims0, sims1 = idle_peers(clients, n, simulations=True)
    per_peer = (bare1["rss"] - bare0["rss"]) / n
    per_sim = (sims1["rss"] - sims0["rss"]) / n
    per_used = (junk1["rss"] - junk0["rss"]) / n
    traced = (sims1["traced"] - sims0["traced"]) / n
    state = (sims1["state"] - sims0["state"]) / n
    rows = [
        {"case": f"receiver RSS with {n:,} connected idle simulations",
         "ours": round(sims1["rss"] / MB, 1), "baseline": round(sims0["rss"] / MB, 1),
         "unit": "MB", "ratio": round(sims0["rss"] / sims1["rss"], 3), "target": None},
        {"case": "receiver RSS per connected idle simulation",
         "ours": round(per_sim / KB, 1), "baseline": round(per_peer / KB, 1),
         "unit": "KB", "ratio": round(per_peer / per_sim, 3), "target": None},
    ]  # fmt: skip
    notes = [
        f"memory, per connected idle simulation (HELLO and one {MEMORY_FIELD // KB} KB step, "
        f"no BYE; {n:,} of them from {PEER_PROCESSES} processes): {per_sim / KB:,.1f} KB of "
        f"RSS; a bare ZeroMQ connection (no HELLO; the baseline) {per_peer / KB:,.1f} KB, "
        f"one that has sent a {MEMORY_FIELD // KB} KB message {per_used / KB:,.1f} KB; "
        f"the receiver's Python objects (tracemalloc: ledger, ingest entries) "
        f"{traced / KB:,.2f} KB; the dedup record {state:,.0f} bytes of state_dict JSON",
        f"memory, receiver RSS: {sims0['rss'] / MB:,.1f} MB idle, {sims1['rss'] / MB:,.1f} MB "
        f"with {n:,} idle simulations ({bare1['rss'] / MB:,.1f} MB with {n:,} bare "
        f"connections, from {bare0['rss'] / MB:,.1f}); queued messages: none while idle, at "
        f"most RCVHWM + 2 per connection when a client is held back",
    ]
    return rows, notes


def main() -> None:
    global SETTLE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="fewer, shorter rounds; N <= 64")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="length of a stream")
    parser.add_argument("--sizes", default="1KB,1MB", help="field sizes: 1KB,1MB")
    parser.add_argument("--clients", default=None, help="N list, e.g. 1,16,64,256")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory rows")
    parser.add_argument("--idle", type=int, default=IDLE_PEERS, help="idle simulations")
    parser.add_argument(
        "--settle", type=float, default=SETTLE, help="seconds before each memory probe"
    )
    parser.add_argument("--ceiling", action="store_true", help="also unpaced streams")
    opts = parser.parse_args()
    SETTLE = opts.settle
    if opts.idle < PEER_PROCESSES:
        parser.error(f"--idle must be at least {PEER_PROCESSES}")
    rounds = opts.rounds or (2 if opts.quick else 5)
    seconds = opts.seconds or (1.5 if opts.quick else 4.0)
    sizes = [{"1KB": KB, "1MB": MB}[s.strip().upper()] for s in opts.sizes.split(",")]
    ns = sorted({1, *map(int, (opts.clients or ("1,16,64" if opts.quick else "1,16,64,256"))
                                .split(","))})  # fmt: skip
    raise_fd_limit()
    # forked first, while this process has no ZeroMQ context nor thread
    clients = Pool(max(ns[-1], 4, PEER_PROCESSES), client_main)
    receiver = Pool(1, receiver_main)
    try:
        rows, notes = fanin_rows(receiver, clients, sizes, ns, rounds, seconds)
        if opts.ceiling:
            notes += ceiling_notes(receiver, clients, sizes)
        if not opts.no_memory:
            more, mem_notes = memory_rows(clients, opts.idle // PEER_PROCESSES * PEER_PROCESSES)
            rows, notes = rows + more, notes + mem_notes
    finally:
        receiver.close()
        clients.close()
    title = (
        f"medians of {rounds} interleaved rounds of ~{seconds:g} s; CPU rows: ratio = "
        f"cost at N=1 / cost at N; memory rows: ratio = baseline / ours"
    )
    finish(rows, title, 64, as_json=opts.json, notes=notes)


if __name__ == "__main__":
    main()
