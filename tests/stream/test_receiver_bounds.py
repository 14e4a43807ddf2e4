"""The receiver's bounds hold: samples being reassembled stay within `max_pending` and
`max_pending_bytes`, and a thousand simulations connecting at once are all accepted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import netns
import numpy as np
import pytest
from hardening_runs import F32

from melissa_trainer import wire as P
from melissa_trainer.stream.ingest import Ingest


def test_pending_samples_stay_within_max_pending_and_max_pending_bytes() -> None:
    """Random parts of samples of simulations of different sizes and client counts,
    some never completed: after every message, the samples in progress are at most
    `max_pending`, their reserved bytes at most `max_pending_bytes` (or one sample, if
    a single sample is larger), and the accounting matches what is held."""
    rng = np.random.default_rng(15)
    max_pending, max_bytes = 6, 3000
    completed: list[tuple[int, int]] = []

    def put(sample: Any) -> bool:
        completed.append((int(sample["simulation_id"]), int(sample["time_step"])))
        return True

    ing = Ingest(
        0,
        1,
        put=put,
        end=lambda why: None,
        expected=None,
        max_field_bytes=1 << 20,
        max_pending=max_pending,
        max_pending_bytes=max_bytes,
        max_time_step=1 << 20,
        recent_size=64,
    )
    # (simulation, client ranks, fields): 400 to 4,000 bytes a sample
    sims = {1: (2, [("u", (25,))]), 2: (3, [("u", (100,)), ("v", (50,))]), 3: (4, [("w", (1000,))])}
    largest = 0
    for sid, (ranks, fields) in sims.items():
        specs = [P.FieldSpec(name, F32, shape) for name, shape in fields]
        for r in range(ranks):
            hello = P.decode(P.encode_hello(sid, r, ranks, specs))
            assert isinstance(hello, P.Hello)
            ing.hello(hello)
        largest = max(largest, sum(4 * int(np.prod(shape)) for _, shape in fields))
    for _ in range(5000):
        sid = int(rng.integers(1, 4))
        ranks, fields = sims[sid]
        t, r = int(rng.integers(0, 40)), int(rng.integers(0, ranks))
        name, shape = fields[int(rng.integers(0, len(fields)))]
        size = int(np.prod(shape))
        lo, hi = r * size // ranks, (r + 1) * size // ranks
        head = P.encode_data_header(
            sid, t, r, ranks, name.encode(), P.dtype_code(F32), shape, lo, hi - lo, True
        )
        msg = P.decode(head + np.zeros(hi - lo, F32).tobytes())
        assert isinstance(msg, P.Data)
        ing.data(msg, True)
        held = sum(asm.nbytes for asm in ing.pending.values())
        assert len(ing.pending) <= max_pending
        assert held == ing._pending_bytes <= max(max_bytes, largest)
        assert held <= max_bytes or len(ing.pending) == 1
    assert ing.incomplete_dropped > 0 and completed  # both bounds were exercised
    assert ing.telemetry()["incomplete_dropped"] == ing.incomplete_dropped


BURST = r"""
import multiprocessing as mp, resource, sys, time
import zmq
sys.path.insert(0, sys.argv[1])
from helpers import handled, running
from melissa_trainer import wire as protocol

PEERS, PER_PEER = 4, 250

def overflows():
    lines = open("/proc/net/netstat").read().splitlines()
    for head, values in zip(lines[::2], lines[1::2]):
        if head.startswith("TcpExt:"):
            return int(dict(zip(head.split()[1:], values.split()[1:]))["ListenOverflows"])

def peers(endpoint, first, ready, go, done):
    context = zmq.Context()
    field = protocol.FieldSpec("u", protocol.DTYPES[1], (1,))
    ready.wait()
    go.wait()
    sockets = [context.socket(zmq.PUSH) for _ in range(PER_PEER)]
    for sock in sockets:
        sock.connect(endpoint)
    for i, sock in enumerate(sockets):  # one HELLO per connection: its proof of arrival
        sock.send(protocol.encode_hello(first + i, 0, 1, [field]))
    done.wait()
    for sock in sockets:
        sock.close(linger=0)

if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
    with running(fields=None) as receiver:
        ready, go, done = mp.Barrier(PEERS + 1), mp.Event(), mp.Event()
        procs = [mp.Process(target=peers, args=(receiver.endpoint, 1000 * k, ready, go, done))
                 for k in range(PEERS)]
        for p in procs:
            p.start()
        ready.wait(30)  # every peer process is up, its context made
        before = overflows()
        go.set()
        deadline = time.monotonic() + 30
        # every connection's HELLO handled (read is not enough: the last one's ledger,
        # which waiting_for() lists, is made after its read)
        while handled(receiver) < PEERS * PER_PEER:
            assert time.monotonic() < deadline, receiver.telemetry()
            time.sleep(0.01)
        tel = receiver.telemetry()
        print(int(tel["messages"]), int(tel["rejected"]), len(receiver.waiting_for()),
              overflows() - before)
        done.set()
        for p in procs:
            p.join(10)
"""


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_thousand_simulations_connecting_at_once_are_all_accepted(tmp_path: Path) -> None:
    """1,000 connections at once (a study's start): every one is accepted (each sends
    one HELLO, and all 1,000 arrive), and the kernel queued them all for the receiver (its
    listen backlog): none was dropped to retry seconds later, counted by the kernel
    (TcpExt ListenOverflows) in a network namespace of the test's own."""
    unshare = netns.UNSHARE
    if (why := netns.cannot_unshare()) is not None:
        pytest.skip(why)
    script = tmp_path / "burst.py"
    script.write_text(BURST)
    tests = str(Path(__file__).parents[1])
    out = subprocess.run(
        [unshare, "--net", "sh", "-c", f'ip link set lo up && exec "{sys.executable}" "$@"',
         "sh", str(script), tests],
        capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    messages, rejected, simulations, overflows = map(int, out.stdout.split()[-4:])
    # every connection delivered its HELLO: 1,000 connections accepted, 1,000 simulations
    assert (messages, rejected, simulations) == (1000, 0, 1000)
    assert overflows == 0  # none refused by the kernel first (libzmq's backlog of 100: hundreds)
