"""Connection memory: does a receiver's RSS keep what its closed connections used?

One real `Receiver` (a FIFO buffer drained by a consumer thread, as training does) in a
process of its own takes SIMS simulations, one after the other, from one client
process: each a new `Client` (its own id, a new TCP connection) that says HELLO, sends
STEPS steps of one float32 field of NBYTES (one message each, no batching) and closes
(BYE, confirmed). The baseline: a raw pyzmq PULL socket (the receiver's options that
matter here: no linger, a receive timeout) in a fresh process, read by a thread, fed
the same messages by as many short-lived PUSH sockets, one after the other (each in a
ZeroMQ context of its own, as a simulation's process: connect, STEPS sends, close,
term, which returns once every message is sent): what libzmq and the allocator alone
keep per closed connection.

Every EVERY simulations, once every message is in (ours: the simulations are in
``completed()``; raw: the messages counted) and every connection is closed on the
receiving side too (the process's open descriptors back to their count before the
first client; so libzmq's session and engine of each are destroyed), the receiver
process's VmRSS is sampled. At the end it calls glibc's ``malloc_trim(0)`` and samples
again: what that gives back is memory freed but kept by the allocator (its arenas and
their fragmentation), not a leak. The arms run in fresh processes, in turn (ours, raw,
ours, raw, ...); medians over rounds.

Rows (``--json``: ``{"rows": [...]}``; ours: the receiver, baseline: raw pyzmq):

* RSS growth per closed connection over the run's second half (SIMS/2 to SIMS): a leak
  shows as a growth that stays the same whatever SIMS; the allocator's retention as one
  that falls towards 0 as SIMS grows (a plateau);
* the same over the first half (warm-up: caches, arenas, first allocations);
* the RSS given back by ``malloc_trim(0)`` at the end, and how long the call took.

Linux with glibc only (``/proc``, ``malloc_trim``). Set ``MALLOC_ARENA_MAX`` in the
environment to see the arenas' share: the arms inherit it.

    python benchmarks/connection_memory.py               # 4,000 simulations, 2 rounds; ~1 min
    python benchmarks/connection_memory.py --quick       # 1,000 simulations, 1 round
    python benchmarks/connection_memory.py --sims 10000 --every 1000 --json
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402

ARMS = ("ours", "raw")
#: seconds an arm may wait for a batch of simulations to be in and closed
BATCH_TIMEOUT = 120.0


def rss_kb() -> int:
    """This process's VmRSS, in KB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def malloc_trim() -> float | None:
    """Call glibc's ``malloc_trim(0)``; its seconds, or None without glibc."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is None:
        return None
    t0 = time.perf_counter()
    trim(0)
    return time.perf_counter() - t0


# -- one arm, in a process of its own ----------------------------------------------------


def client_main(conn: Connection, arm: str, steps: int, nbytes: int) -> None:
    """The client process: for each (first, n) read from `conn`, n simulations with ids
    from `first`, one after the other; answers with the next id. None ends it."""
    import numpy as np
    import zmq

    from melissa_trainer.client import Client, ClientTuning

    endpoint = conn.recv()
    ctx = zmq.Context()
    u = np.ones(nbytes // 4, np.float32)
    tuning = ClientTuning(batch_bytes=0)
    while (cmd := conn.recv()) is not None:
        first, n = cmd
        for sim in range(first, first + n):
            if arm == "ours":
                client = Client({"u": ((u.size,), "float32")}, None, sim, [endpoint],
                                context=ctx, tuning=tuning)  # fmt: skip
                for step in range(steps):
                    client.send(step, u=u)
                client.close()
            else:
                # (a context of its own, as a simulation's process: its term() returns
                # once every message is sent, so the connections come one at a time)
                own = zmq.Context()
                sock = own.socket(zmq.PUSH)
                sock.connect(endpoint)
                for _ in range(steps):
                    sock.send(u)
                sock.close(linger=-1)
                own.term()
        conn.send(first + n)
    ctx.term()


class Side:
    """The receiving side of an arm: its endpoint, a count of the simulations fully
    in, and its end."""

    def __init__(self, arm: str, steps: int) -> None:
        self.stop = threading.Event()
        if arm == "ours":
            from melissa_trainer.buffers import FIFOBuffer
            from melissa_trainer.stream.receiver import Receiver
            from melissa_trainer.stream.receiver_config import ReceiverConfig

            self.buffer = FIFOBuffer(1000)
            self.rec: Any = Receiver(self.buffer, 0, 1, ReceiverConfig())
            self.rec.start()
            self.endpoint = str(self.rec.endpoint)
            self.count = lambda: len(self.rec.completed())
            target = self._drain
        else:
            import zmq

            self.ctx = zmq.Context()
            self.sock = self.ctx.socket(zmq.PULL)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.setsockopt(zmq.RCVTIMEO, 50)
            self.endpoint = f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"
            self.messages = 0
            self.count = lambda: self.messages // steps
            target = self._read
        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        # (as the training thread: pump the receiver, take what there is)
        while not self.stop.is_set():
            self.rec.pump()
            with contextlib.suppress(TimeoutError):  # (nothing came: pump again)
                self.buffer.get_batch(max(1, min(len(self.buffer), 100)), timeout=0.05)

    def _read(self) -> None:
        import zmq

        while not self.stop.is_set():
            try:
                self.sock.recv(copy=False)
                self.messages += 1
            except zmq.Again:
                pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        if hasattr(self, "rec"):
            self.rec.stop()
        else:
            self.sock.close()
            self.ctx.term()


def run_arm(arm: str, sims: int, every: int, steps: int, nbytes: int) -> dict[str, Any]:
    """One arm in this process (the client forked first, before any ZeroMQ context):
    ``samples`` [(simulations done, RSS KB)], and RSS before and after ``malloc_trim``."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=client_main, args=(child, arm, steps, nbytes), daemon=True)
    proc.start()
    side = Side(arm, steps)
    try:
        fds = open_fds()  # (before any connection: the count each batch must come back to)
        parent.send(side.endpoint)
        samples: list[tuple[int, int]] = []
        done = 0
        while done < sims:
            parent.send((1 + done, min(every, sims - done)))
            if not parent.poll(BATCH_TIMEOUT):
                raise TimeoutError(f"{arm}: the client did not finish simulations after {done}")
            done = parent.recv() - 1
            deadline = time.monotonic() + BATCH_TIMEOUT
            while side.count() < done or open_fds() > fds:  # (in, and every connection gone)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{arm}: {side.count()} of {done} in, {open_fds()} fds")
                time.sleep(0.005)
            samples.append((done, rss_kb()))
        before = rss_kb()
        trim_s = malloc_trim()
        out = {"samples": samples, "before_trim": before, "after_trim": rss_kb(), "trim_s": trim_s}
        parent.send(None)
        proc.join(30)
        return out
    finally:
        side.close()
        if proc.is_alive():
            proc.kill()
            proc.join()


# -- the controller ----------------------------------------------------------------------


def growth_per_sim(samples: list[tuple[int, int]], lo: float, hi: float) -> float:
    """KB of RSS per simulation between the samples at the first count >= `lo` and the
    last <= `hi`."""
    a = next(s for s in samples if s[0] >= lo)
    b = [s for s in samples if s[0] <= hi][-1]
    return (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else float("nan")


def figures(run: dict[str, Any]) -> dict[str, float]:
    """One arm's figures: growth per simulation (KB) over each half, KB given back by
    malloc_trim and its milliseconds."""
    samples = run["samples"]
    total = samples[-1][0]
    return {
        "first": growth_per_sim(samples, samples[0][0], total / 2),
        "second": growth_per_sim(samples, total / 2, total),
        "trimmed": float(run["before_trim"] - run["after_trim"]),
        "trim_ms": 1000 * run["trim_s"] if run["trim_s"] is not None else float("nan"),
    }


def rows_of(runs: dict[str, list[dict[str, Any]]], sims: int) -> list[dict[str, Any]]:
    """The rows: medians over rounds of each arm's `figures`, ours against raw."""
    med = {arm: {k: statistics.median(figures(r)[k] for r in runs[arm])
                 for k in ("first", "second", "trimmed", "trim_ms")}
           for arm in ARMS}  # fmt: skip
    cases = [
        ("second", f"RSS growth per closed connection, {sims // 2:,}-{sims:,}", "KB"),
        ("first", f"RSS growth per closed connection, 0-{sims // 2:,} (warm-up)", "KB"),
        ("trimmed", f"RSS given back by malloc_trim(0) after {sims:,}", "KB"),
        ("trim_ms", "malloc_trim(0) call", "ms"),
    ]
    rows = []
    for key, case, unit in cases:
        # (the ratio of the figures as printed: they are rounded first)
        ours, base = round(med["ours"][key], 3), round(med["raw"][key], 3)
        ratio = round(base / ours, 3) if ours > 0 and base > 0 else None
        rows.append({"case": case, "ours": ours, "baseline": base,
                     "unit": unit, "ratio": ratio, "target": None})  # fmt: skip
    return rows


def spawn_arm(arm: str, opts: argparse.Namespace) -> dict[str, Any]:
    """`run_arm` in a fresh interpreter (this script with ``--arm``): its result."""
    cmd = [sys.executable, __file__, "--arm", arm, "--sims", str(opts.sims), "--every",
           str(opts.every), "--steps", str(opts.steps), "--nbytes", str(opts.nbytes)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"arm {arm} failed ({done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_flags(parser, quick="1,000 simulations, 1 round")
    parser.add_argument("--sims", type=int, default=None, help="simulations per arm")
    parser.add_argument("--every", type=int, default=None, help="simulations between samples")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps", type=int, default=5, help="steps per simulation")
    parser.add_argument("--nbytes", type=int, default=256, help="bytes of a step's field")
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # (one arm, inside)
    opts = parser.parse_args()
    opts.sims = opts.sims or (1000 if opts.quick else 4000)
    opts.every = opts.every or max(1, opts.sims // 8)
    if opts.sims < 2 * opts.every:
        parser.error("--sims must be at least twice --every (two halves to compare)")
    if opts.arm:
        print(to_json(run_arm(opts.arm, opts.sims, opts.every, opts.steps, opts.nbytes)))
        return
    rounds = opts.rounds or (1 if opts.quick else 2)
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for _ in range(rounds):
        for arm in ARMS:  # (interleaved: ours, raw, ours, raw, ...)
            runs[arm].append(spawn_arm(arm, opts))
    notes = [
        f"{arm} RSS (MB) at "
        + ", ".join(f"{n:,}: {kb / 1024:.1f}" for n, kb in r["samples"])
        + f"; after malloc_trim(0): {r['after_trim'] / 1024:.1f}"
        for arm in ARMS
        for r in runs[arm]
    ]
    title = (
        f"receiver RSS over {opts.sims:,} simulations closed one after the other "
        f"({opts.steps} steps of {opts.nbytes} B); medians of {rounds} interleaved "
        f"round(s); baseline: raw pyzmq PULL, same traffic; ratio = baseline / ours"
    )
    finish(rows_of(runs, opts.sims), title, 58, as_json=opts.json, notes=notes)


if __name__ == "__main__":
    main()
