"""The stream receiver over real sockets ingests every step exactly once, bit-exact: from
`scripts/stream_client.py` processes (batched small fields too, and a killed client
restarted), from two ranks' partial fields reassembled, and shared round-robin by two
receivers.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import drain, running
from receiver_runs import F32, check_stream, data, pushes, send, tel, value
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer, Sample, SampleBlock
from melissa_trainer.stream.ingest_counters import telemetry_keys

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import stream_client as sc  # noqa: E402

CLIENT = str(SCRIPTS / "stream_client.py")


def client(
    endpoints: str,
    sim: int,
    steps: int,
    fields: list[str],
    *extra: str,
    stdout: Any = subprocess.DEVNULL,
) -> subprocess.Popen:
    args = [
        sys.executable,
        CLIENT,
        "--endpoints",
        endpoints,
        "--simulation-id",
        str(sim),
        "--steps",
        str(steps),
    ]
    for f in fields:
        args += ["--field", f]
    return subprocess.Popen(args + list(extra), stdout=stdout, text=True)


def reap(*procs: subprocess.Popen, timeout: float = 10.0) -> None:
    """Wait for the processes to exit (killed after `timeout`)."""
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_client_processes_arrive_exactly_once_bit_exact() -> None:
    fields = ["u:<f4:8,4", "big:<f8:9000", "flags:|b1:5", "n:<i8:"]
    specs = [sc.parse_field(f) for f in fields]
    buf = FIFOBuffer(500)
    with running(buf, expected_simulations=3) as rec:
        assert rec.endpoint is not None and rec.endpoint.startswith("tcp://127.0.0.1:")
        procs = [
            client(rec.endpoint, sim, 15, fields, "--param", f"a={sim}", "--param", "b=0.5")
            for sim in (3, 4, 2**63 + 5)
        ]
        try:
            samples = drain(buf)
        finally:
            reap(*procs)
        assert all(p.returncode == 0 for p in procs)
        tel = rec.telemetry()
    ids = (3, 4, 2**63 + 5)  # an id >= 2**63 wraps around in the int64 "simulation_id"
    assert any(int(s["simulation_id"]) < 0 for s in samples)
    # declared fields in the HELLO's order, then the receiver's entries
    assert list(samples[0]) == [
        "u",
        "big",
        "flags",
        "n",
        "simulation_id",
        "time_step",
        "parameters",
    ]
    check_stream(samples, {sim: (range(15), specs, {"a": float(sim), "b": 0.5}) for sim in ids})
    assert tel["samples_put"] == 45 and tel["duplicates"] == 0 and tel["rejected"] == 0
    assert tel["simulations_finished"] == 3
    assert set(tel) == set(telemetry_keys())
    assert buf.closed


BATCHING_CLIENT = r"""
import sys
sys.path.insert(0, sys.argv[3])
import stream_client as sc
from melissa_trainer.client import Client
endpoint, sim = sys.argv[1], int(sys.argv[2])
spec = sc.parse_field("u:<f4:8,4")
with Client({"u": (spec.shape, "float32")}, {"a": 1.0}, sim, [endpoint]) as c:
    for t in range(300):
        c.send(t, u=sc.field_value(sim, t, 0, spec))
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_batched_small_fields_taken_as_blocks_arrive_exactly_once_bit_exact() -> None:
    """The receiver puts the batches of `Client` processes into the FIFO as blocks; a
    reader taking blocks of 7 (which split and join them) gets every step once."""
    specs = [sc.parse_field("u:<f4:8,4")]
    buf = FIFOBuffer(64)  # small: the clients are held back, blocks split at its edge
    with running(buf, expected_simulations=3) as rec:
        assert rec.endpoint is not None
        scripts = str(SCRIPTS)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", BATCHING_CLIENT, rec.endpoint, str(sim), scripts]
            )
            for sim in (1, 2, 3)
        ]
        samples: list[Sample] = []
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    block = buf.get_block(7, timeout=0.05)
                except TimeoutError:
                    continue
                if not block:  # the end of the stream
                    break
                assert isinstance(block, SampleBlock) and 1 <= len(block) <= 7
                assert block.fields["u"].flags.owndata  # the reader's own arrays
                samples += block.samples()
        finally:
            reap(*procs)
        assert all(p.returncode == 0 for p in procs)
        tel = rec.telemetry()
    check_stream(samples, {sim: (range(300), specs, {"a": 1.0}) for sim in (1, 2, 3)})
    assert tel["samples_put"] == 900 and tel["duplicates"] == 0
    assert tel["messages"] < 300  # the clients batched their steps: the receiver got blocks


@pytest.mark.timeout(30)
def test_partial_fields_from_two_ranks_are_reassembled_bit_for_bit() -> None:
    field = P.FieldSpec("f", np.dtype("<f8"), (6, 5))
    big = P.FieldSpec("big", F32, (40000,))  # halves of 80 KB: two-frame messages
    specs = [field, big]
    buf = FIFOBuffer(100)
    with running(buf, expected_simulations=1) as rec, pushes(rec.endpoint, n=2) as socks:
        for r, s in enumerate(socks):
            send(s, [P.encode_hello(9, r, 2, specs, {"k": 1.0})])

        def part(t: int, r: int, spec: P.FieldSpec, i: int, **kw: Any) -> list[bytes]:
            start, end = sc.part_range(spec.size, r, 2)
            return data(9, t, spec, value(9, t, spec, i), r, 2, start, end, **kw)

        for t in range(6):
            order = (1, 0) if t % 2 else (0, 1)
            for r in order:
                for i, spec in enumerate(specs):
                    send(socks[r], part(t, r, spec, i))
                    if t == 2 and r == order[0]:  # re-sent mid-assembly: a duplicate
                        send(socks[r], part(t, r, spec, i))
        # an overlapping part (rank 1 claims [10, 20) of "f" while rank 0 holds [0, 15))
        send(socks[0], part(6, 0, field, 0))
        wait_until(
            lambda: tel(rec, "messages") == 2 + 6 * 2 * 2 + 2 + 1,
            "the condition",
            UNTIL_TEST_TIMEOUT,
        )  # all of the above arrived
        bad = data(9, 6, field, value(9, 6, field, 0), 1, 2, 10, 20)
        send(socks[1], bad)
        wait_until(lambda: tel(rec, "rejected_overlap") == 1, "the condition", UNTIL_TEST_TIMEOUT)
        send(socks[1], part(6, 1, field, 0))
        for r in (0, 1):
            send(socks[r], part(6, r, big, 1))
            send(socks[r], [P.encode_bye(9, r, 2, 7)])
        samples = drain(buf)
        assert tel(rec, "duplicates") == 2
    check_stream(samples, {9: (range(7), specs, {"k": 1.0})})


@pytest.mark.e2e
@pytest.mark.timeout(150)
def test_killed_client_restarted_resends_everything_and_each_step_arrives_once() -> None:
    fields = ["u:<f4:64", "v:<i4:3,3"]
    specs = [sc.parse_field(f) for f in fields]
    buf = FIFOBuffer(500)
    with running(buf, expected_simulations=1) as rec:
        first = client(rec.endpoint, 5, 40, fields, "--delay", "0.02", stdout=subprocess.PIPE)
        try:
            wait_until(lambda: len(buf) >= 10, "the first client's 10 steps", 60.0)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            assert first.returncode == -signal.SIGKILL
            assert not buf.closed
            second = client(rec.endpoint, 5, 40, fields)
            samples = drain(buf)
            second.wait(10)
        finally:
            reap(first)
        assert tel(rec, "duplicates") >= 10 * 2
        assert tel(rec, "samples_put") == 40
    check_stream(samples, {5: (range(40), specs, {})})


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_two_receivers_share_the_steps_round_robin() -> None:
    fields = ["u:<f4:6"]
    specs = [sc.parse_field(f) for f in fields]
    bufs = [FIFOBuffer(100), FIFOBuffer(100)]
    with (
        running(bufs[0], rank=0, world_size=2, expected_simulations=2) as r0,
        running(bufs[1], rank=1, world_size=2, expected_simulations=2) as r1,
    ):
        eps = f"{r0.endpoint},{r1.endpoint}"
        procs = [client(eps, 1, 11, fields), client(eps, 2, 4, fields)]
        try:
            parts = [drain(b) for b in bufs]
        finally:
            reap(*procs)
        with pushes(r0.endpoint) as (s,):  # after the end: read and ignored
            send(s, data(1, 1, specs[0], value(1, 1, specs[0])))
            wait_until(
                lambda: tel(r0, "ignored_after_end") == 1, "the condition", UNTIL_TEST_TIMEOUT
            )
    for rank, samples in enumerate(parts):
        assert all(int(s["time_step"]) % 2 == rank for s in samples)
    check_stream(parts[0] + parts[1], {1: (range(11), specs, {}), 2: (range(4), specs, {})})
    assert r0.finished_simulations() and sorted(r1.finished_simulations()) == [1, 2]
