"""The stream receiver over real sockets: exactly-once ingest, reassembly, validation,
back-pressure, checkpoints, shutdown. Clients are raw pyzmq PUSH sockets (in-process)
or `scripts/stream_client.py` processes; nothing here depends on `melissa_trainer.client`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from helpers import drain, running
from hypothesis import given, settings
from hypothesis import strategies as st
from waiting import wait_until
from zmq.utils.monitor import recv_monitor_message

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer, Sample, SampleBlock
from melissa_trainer.buffers.block import SHARED_ROWS, SMALL_ROW_BYTES
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.assembly import StepLedger
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.receiver import (
    Receiver,
    ReceiverConfig,
    ReceiverTuning,
    telemetry_keys,
)

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
import stream_client as sc  # noqa: E402

CLIENT = str(SCRIPTS / "stream_client.py")
F32 = np.dtype("<f4")
U = P.FieldSpec("u", F32, (4, 3))


# -- helpers -------------------------------------------------------------------------------


@contextmanager
def pushes(*endpoints: str, n: int = 1, **opts: Any) -> Iterator[list[zmq.Socket]]:
    """`n` PUSH sockets connected to every endpoint given (one context)."""
    ctx = zmq.Context()
    socks = []
    for _ in range(n):
        s = ctx.socket(zmq.PUSH)
        for k, v in opts.items():
            setattr(s, k, v)
        for ep in endpoints:
            s.connect(ep)
        socks.append(s)
    try:
        yield socks
    finally:
        for s in socks:
            s.close(linger=0)
        ctx.term()


@contextmanager
def monitored_push(endpoint: str, events: int) -> Iterator[tuple[zmq.Socket, zmq.Socket]]:
    """A PUSH socket without a key and its monitor (`events`), attached before it
    connects to `endpoint`, so that none of its connection's events is missed."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    monitor = sock.get_monitor_socket(events)
    sock.connect(endpoint)
    try:
        yield sock, monitor
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        ctx.term()


def data(
    sim: int,
    t: int,
    spec: P.FieldSpec,
    value: np.ndarray,
    rank: int = 0,
    count: int = 1,
    start: int = 0,
    end: int | None = None,
    **kw: Any,
) -> list[bytes]:
    """The frames of one DATA message (INLINE when small, like the client)."""
    flat = np.ascontiguousarray(value).reshape(-1)
    end = flat.size if end is None else end
    payload = flat[start:end].tobytes()
    inline = kw.pop("inline", len(payload) <= sc.INLINE_MAX_BYTES)
    args = dict(name=spec.name.encode(), dtype_code=P.dtype_code(spec.dtype), shape=spec.shape)
    args.update(kw)
    head = P.encode_data_header(
        sim,
        t,
        rank,
        count,
        args["name"],
        args["dtype_code"],
        args["shape"],
        start,
        end - start,
        inline,
    )
    return [head + payload] if inline else [head, payload]


#: the monitor events that end a client's handshake, one way or the other
_HANDSHAKE_ENDS = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_DISCONNECTED
)


def send(sock: zmq.Socket, frames: list[bytes]) -> None:
    sock.send_multipart(frames)


def value(sim: int, t: int, spec: P.FieldSpec, index: int = 0) -> np.ndarray:
    return sc.field_value(sim, t, index, spec)


def tel(rec: Receiver, key: str) -> float:
    return rec.telemetry()[key]


def settled(read: Callable[[], int], quiet: float, timeout: float = 10.0) -> int:
    """`read()` once it has not changed for `quiet` seconds (AssertionError after
    `timeout`)."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, f"still changing after {timeout} s: {value}"
        time.sleep(0.01)
        if (now := read()) != value:
            value, since = now, time.monotonic()
    return value


def check_stream(
    samples: list[Sample], sims: dict[int, tuple[range, list[P.FieldSpec], dict[str, float]]]
) -> None:
    """Every (simulation, step) exactly once, every value bit for bit."""
    keys = [(int(s["simulation_id"]) % 2**64, int(s["time_step"])) for s in samples]
    assert len(keys) == len(set(keys)), "a (simulation, step) arrived twice"
    assert set(keys) == {(sim, t) for sim, (steps, _, _) in sims.items() for t in steps}
    for s in samples:
        sim, t = int(s["simulation_id"]) % 2**64, int(s["time_step"])
        _, specs, params = sims[sim]
        assert set(s) == {f.name for f in specs} | {"simulation_id", "time_step", "parameters"}
        for i, spec in enumerate(specs):
            got, want = s[spec.name], value(sim, t, spec, i)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), (sim, t, spec.name)
        assert s["parameters"].dtype == np.float64
        assert s["parameters"].tolist() == list(params.values())
        assert s["simulation_id"].shape == () and s["simulation_id"].dtype == np.int64


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


# -- exactly once, reassembly ----------------------------------------------------------------


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
            lambda: tel(rec, "messages") == 2 + 6 * 2 * 2 + 2 + 1, "the condition", 10.0
        )  # all of the above arrived
        bad = data(9, 6, field, value(9, 6, field, 0), 1, 2, 10, 20)
        send(socks[1], bad)
        wait_until(lambda: tel(rec, "rejected_overlap") == 1, "the condition", 10.0)
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
            wait_until(lambda: tel(r0, "ignored_after_end") == 1, "the condition", 10.0)
    for rank, samples in enumerate(parts):
        assert all(int(s["time_step"]) % 2 == rank for s in samples)
    check_stream(parts[0] + parts[1], {1: (range(11), specs, {}), 2: (range(4), specs, {})})
    assert r0.finished_simulations() and sorted(r1.finished_simulations()) == [1, 2]


# -- validation ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_malformed_messages_are_counted_by_reason_and_the_stream_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    v = P.FieldSpec("v", np.dtype("<f8"), (2,))
    buf = FIFOBuffer(100)
    bad: list[tuple[str, list[bytes]]] = [
        ("truncated", [b"MTR"]),
        ("bad_magic", [b"this is no message at all"]),
        ("bad_version", [P.PREFIX.pack(P.MAGIC, 9, P.HELLO, 0, 1) + bytes(8)]),
        ("bad_kind", [P.PREFIX.pack(P.MAGIC, P.VERSION, 7, 0, 1) + bytes(8)]),
        ("missing_frame", data(1, 0, U, value(1, 0, U), inline=False)[:1]),
        ("bad_size", [data(1, 0, U, value(1, 0, U))[0][:-4]]),
        ("bad_dtype", data(1, 0, U, value(1, 0, U), dtype_code=99)),
        ("bad_rank", data(1, 0, U, value(1, 0, U), rank=2, count=2)),
        ("bad_range", [P.encode_data_header(1, 0, 0, 1, b"u", 1, (4, 3), 10, 5, True) + bytes(20)]),
        ("bad_name", data(1, 0, U, value(1, 0, U), name=b"\xff\xfe")),
        ("bad_hello", [P.encode_hello(2, 0, 1, [P.FieldSpec("time_step", F32, (1,))])]),
        ("bad_hello", [P.encode_hello(2, 0, 1, [U])[:-3] + b"}}}"]),
        ("bad_hello", [P.encode_hello(2, 0, 1, [U], {"p": float("nan")})]),
        ("too_large", [P.encode_hello(3, 0, 1, [P.FieldSpec("w", F32, (1 << 20,))])]),
        ("no_hello", data(99, 0, U, value(99, 0, U))),
        ("no_hello", [P.encode_bye(99, 0, 1, 3)]),
        ("hello_mismatch", [P.encode_hello(1, 0, 1, [U, v], {"p": 2.0})]),
        ("bad_field", data(1, 0, v, value(1, 0, v))),
        ("bad_field", [P.encode_data_header(1, 0, 0, 1, b"u", 2, (4, 3), 0, 12, True) + bytes(96)]),
        ("bad_client_count", data(1, 0, U, value(1, 0, U), count=3)),
        ("bad_step", data(1, 5000, U, value(1, 0, U))),
    ]
    with (
        running(buf, expected_simulations=1, max_time_step=1000, max_message_bytes=1 << 20) as rec,
        pushes(rec.endpoint) as (s,),
    ):
        send(s, [P.encode_hello(1, 0, 1, [U], {"p": 1.0})])
        for t in range(3):
            send(s, data(1, t, U, value(1, t, U)))
        for _, frames in bad:
            send(s, frames)
        send(s, data(1, 1, U, value(1, 1, U)))  # a duplicate
        for t in range(3, 6):
            send(s, data(1, t, U, value(1, t, U)))
        send(s, [P.encode_bye(1, 0, 1, 6)])
        samples = drain(buf)
        rec.check()  # alive, no failure
        tel = rec.telemetry()
    expected: dict[str, int] = {}
    for reason, _ in bad:
        expected[reason] = expected.get(reason, 0) + 1
    got = {k[len("rejected_") :]: int(n) for k, n in tel.items() if k.startswith("rejected_") and n}
    assert got == expected
    assert tel["rejected"] == len(bad) and tel["duplicates"] == 1
    check_stream(samples, {1: (range(6), [U], {"p": 1.0})})
    # logged once per (simulation, reason): here each reason comes from one simulation
    logged = [r for r in caplog.records if "dropped a message" in r.getMessage()]
    assert len(logged) == len(expected)


# -- back-pressure, failure, shutdown ---------------------------------------------------------


@pytest.mark.timeout(120)  # (300 x 128 KB took 21-35 s on a loaded machine)
def test_slow_consumer_blocks_the_client_without_loss() -> None:
    spec = P.FieldSpec("w", np.dtype("<f8"), (16384,))  # 128 KB, two frames
    steps = 300  # about 39 MB: far more than the buffer, the queues and the kernel hold
    buf = FIFOBuffer(4)
    progress = {"sent": 0}
    with (
        running(buf, expected_simulations=1, rcvhwm=4) as rec,
        pushes(rec.endpoint, sndhwm=2) as (s,),
    ):

        def simulate() -> None:
            send(s, [P.encode_hello(4, 0, 1, [spec])])
            for t in range(steps):
                send(s, data(4, t, spec, value(4, t, spec)))
                progress["sent"] = t + 1
            send(s, [P.encode_bye(4, 0, 1, steps)])

        sim = threading.Thread(target=simulate, daemon=True)
        sim.start()
        wait_until(lambda: len(buf) == 4, "the condition", 10.0)
        # blocked: no send for 0.5 s while nobody reads (after a fixed sleep, a loaded
        # machine could still be filling the queues, and the count moved under the check)
        blocked_at = settled(lambda: progress["sent"], 0.5)
        assert sim.is_alive() and blocked_at < steps, "the client's sends did not block"
        samples = drain(buf)
        sim.join(10)
        assert progress["sent"] == steps
    check_stream(samples, {4: (range(steps), [spec], {})})


class _FailingBuffer(FIFOBuffer):
    def put(self, sample: Sample, timeout: float | None = None) -> None:
        raise RuntimeError("disk on fire")


@pytest.mark.timeout(30)
def test_a_failure_in_the_thread_surfaces_from_check_and_closes_the_buffer() -> None:
    buf = _FailingBuffer(10)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        send(s, data(1, 0, U, value(1, 0, U)))
        wait_until(lambda: buf.closed, "the condition", 10.0)
        with pytest.raises(SourceError, match="disk on fire"):
            rec.check()
        assert buf.get_batch(1, timeout=1) == []  # readers wake


@pytest.mark.timeout(30)
def test_stop_while_blocked_in_put_is_prompt_and_releases_the_socket() -> None:
    buf = FIFOBuffer(1)
    rec = Receiver(buf, tuning=ReceiverTuning(put_timeout=0.05))
    rec.start()
    try:
        with pushes(rec.endpoint) as (s,):
            send(s, [P.encode_hello(1, 0, 1, [U])])
            for t in range(3):
                send(s, data(1, t, U, value(1, t, U)))
            wait_until(lambda: tel(rec, "messages") >= 3 and len(buf) == 1, "the condition", 10.0)
            t0 = time.monotonic()
            rec.stop()
            assert time.monotonic() - t0 < 2.0
            assert rec._thread is not None and not rec._thread.is_alive()
            assert rec._socket is None and rec._context is None
            rec.stop()  # idempotent
    finally:
        rec.stop()


@pytest.mark.timeout(30)
def test_finish_ends_the_stream_when_known_simulations_are_done_or_now() -> None:
    buf = FIFOBuffer(10)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        send(s, data(1, 0, U, value(1, 0, U)))
        rec.finish()
        # two more messages (the same HELLO again: no effect) served after the request:
        # the thread handles a request before each receive, so it has seen this one
        send(s, [P.encode_hello(1, 0, 1, [U])])
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 4, "the condition", 10.0)
        assert not buf.closed  # simulation 1 has not said BYE
        send(s, [P.encode_bye(1, 0, 1, 1)])
        assert len(drain(buf)) == 1
        assert rec.finished_simulations() == [1]
    buf = FIFOBuffer(10)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", 10.0)
        rec.finish(wait=False)
        wait_until(lambda: buf.closed, "the condition", 10.0)


@pytest.mark.timeout(30)
def test_pending_assemblies_are_bounded_and_the_simulation_still_finishes() -> None:
    buf = FIFOBuffer(10)
    with (
        running(buf, expected_simulations=1, max_pending=2) as rec,
        pushes(rec.endpoint, n=2) as socks,
    ):
        for r in (0, 1):
            send(socks[r], [P.encode_hello(1, r, 2, [U])])
        wait_until(lambda: tel(rec, "messages") == 2, "the condition", 10.0)
        for t in range(3):  # rank 0's halves of three steps: the oldest is dropped
            send(socks[0], data(1, t, U, value(1, t, U), 0, 2, 0, 6))
        wait_until(lambda: tel(rec, "incomplete_dropped") == 1, "the condition", 10.0)
        for t in (1, 2):
            send(socks[1], data(1, t, U, value(1, t, U), 1, 2, 6, 12))
        for r in (0, 1):
            send(socks[r], [P.encode_bye(1, r, 2, 3)])
        samples = drain(buf)
    check_stream(samples, {1: (range(1, 3), [U], {})})


# -- checkpoints ----------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_dedup_record_survives_a_json_round_trip(tmp_path: Path) -> None:
    buf = FIFOBuffer(20)
    with running(buf) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U], {"a": 3.0})])
        for t in range(5):
            send(s, data(1, t, U, value(1, t, U)))
        wait_until(lambda: len(buf) == 5, "the condition", 10.0)
        buf.save(tmp_path / "buf")  # the trainer saves the buffer, then the source
        send(s, data(1, 5, U, value(1, 5, U)))  # put after the buffer snapshot
        wait_until(lambda: len(buf) == 6, "the condition", 10.0)
        state = json.loads(json.dumps(rec.state_dict()))
    assert state["simulations"]["1"]["parameters"] == [["a", 3.0]]
    assert state["marked"] == 6
    restored = FIFOBuffer(20)
    restored.load(tmp_path / "buf")
    rec2 = Receiver(restored, config=ReceiverConfig(expected_simulations=1))
    rec2.load_state_dict(state)
    assert rec2.state_dict() == state  # before start: what was loaded
    rec2.start()
    try:
        # counters continue, less step 5: put after the buffer's snapshot, it is not in
        # the restored buffer and is counted when it is put again
        assert rec2.telemetry()["samples_put"] == 5
        with pushes(rec2.endpoint) as (s,):  # the simulation restarts: everything again
            send(s, [P.encode_hello(1, 0, 1, [U], {"a": 3.0})])
            for t in range(8):
                send(s, data(1, t, U, value(1, t, U)))
            send(s, [P.encode_bye(1, 0, 1, 8)])
            samples = drain(restored)
        assert tel(rec2, "duplicates") == 5  # steps 0-4; step 5 was not in the buffer's snapshot
        assert tel(rec2, "samples_put") == 8  # each step once (it said 9)
        assert rec2.state_dict()["simulations"]["1"]["finished"] is True
    finally:
        rec2.stop()
    check_stream(samples, {1: (range(8), [U], {"a": 3.0})})


def _version_1_state(world: int) -> dict[str, Any]:
    """Rank 0 of `world` got steps 0 and `world` of simulation 1, whose client (the only
    one) said BYE after 4 steps: a version-1 state, BYE counted over all receivers."""
    ing, _, _ = _ingest(0, world)
    _feed(ing, [P.encode_hello(1, 0, 1, [U])])
    for t in (0, world):
        _feed(ing, data(1, t, U, value(1, t, U)))
    state = json.loads(json.dumps(ing.state_dict()))
    state["version"] = 1
    state["simulations"]["1"]["byes"] = {"0": 4}
    return state


@pytest.mark.timeout(30)
def test_a_version_1_state_of_several_receivers_counts_this_receivers_steps() -> None:
    """Protocol 1's BYE counted steps over all receivers (4 here): read as version 2's
    count, rank 0 of 2 would wait for 4 steps of its own and never finish. Upgraded, it
    counts the steps of rank 0 among 4 (0 and 2), has both, and finishes at start."""
    buf = FIFOBuffer(8)
    for t in (0, 2):  # the buffer restored with the state holds both samples
        buf.put({"u": value(1, t, U), "time_step": np.array(t)})
    rec = Receiver(buf, 0, 2, ReceiverConfig(expected_simulations=1))
    rec.load_state_dict(_version_1_state(2))
    loaded = rec.state_dict()
    assert loaded["version"] == 4 and loaded["simulations"]["1"]["byes"] == {"0": 2}
    rec.start()
    try:
        wait_until(
            lambda: rec.ended, "the condition", 10.0
        )  # no message needed: the stream is over
    finally:
        rec.stop()
    assert rec.finished_simulations() == [1]


def test_a_version_1_state_of_one_receiver_is_kept_and_unknown_versions_refused() -> None:
    state = _version_1_state(1)
    rec = Receiver(FIFOBuffer(8))
    rec.load_state_dict(state)
    assert rec.state_dict()["simulations"]["1"]["byes"] == {"0": 4}  # the same meaning
    with pytest.raises(ValueError, match="unknown receiver state version 7"):
        Receiver(FIFOBuffer(8)).load_state_dict(dict(state, version=7))


def test_state_of_another_rank_is_refused() -> None:
    rec = Receiver(FIFOBuffer(4), rank=1, world_size=2)
    state = rec.state_dict()
    with pytest.raises(ValueError, match="rank 1 of 2"):
        Receiver(FIFOBuffer(4)).load_state_dict(state)


# -- endpoints --------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_rendezvous_file_is_published(tmp_path: Path) -> None:
    with running(rank=1, world_size=2, rendezvous_dir=tmp_path / "rdv") as rec:
        info = json.loads((tmp_path / "rdv" / "rank_1.json").read_text())
        assert info.pop("follow_endpoint").startswith("tcp://")  # (`follow_server`)
        assert info.pop("follow_kinds") == [9, 11, 13]  # (the queries it answers)
        assert info.pop("routing") == "simulation_step"  # ((s + t) % W: protocol section 2)
        assert info == {"version": 1, "rank": 1, "world_size": 2, "endpoint": rec.endpoint}
        assert list((tmp_path / "rdv").iterdir()) == [tmp_path / "rdv" / "rank_1.json"]
    assert (tmp_path / "rdv" / "rank_1.json").exists()  # left for the next run to overwrite


@pytest.mark.timeout(30)
@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_curve_server_accepts_only_clients_with_its_public_key(tmp_path: Path) -> None:
    public, secret = zmq.curve_keypair()
    buf = FIFOBuffer(10)
    with running(
        buf, curve_secret_key=secret, rendezvous_dir=tmp_path, expected_simulations=1
    ) as rec:
        assert rec.curve_public_key == public.decode()
        assert json.loads((tmp_path / "rank_0.json").read_text())["curve_public_key"] == (
            public.decode()
        )
        client_public, client_secret = zmq.curve_keypair()
        with (
            monitored_push(rec.endpoint, _HANDSHAKE_ENDS) as (plain, monitor),
            pushes(  # the server's public key: accepted
                rec.endpoint,
                curve_serverkey=public,
                curve_publickey=client_public,
                curve_secretkey=client_secret,
            ) as (s,),
        ):
            # The plain one (no key) fails its handshake; once it has, its PUSH has no pipe
            # and a blocking send would wait forever (seen on a loaded machine, where the
            # I/O thread failed the handshake before this thread sent): wait for that
            # failure (its monitor attached before it connected: no event missed), so
            # that the order is always that one, and send without blocking.
            assert monitor.poll(20_000), "the plain client's handshake never ended"
            event = recv_monitor_message(monitor)["event"]
            assert event != zmq.EVENT_HANDSHAKE_SUCCEEDED, "a plain client was let in"
            with contextlib.suppress(zmq.Again):  # (no pipe: nothing to queue it on)
                plain.send_multipart([P.encode_hello(1, 0, 1, [U])], flags=zmq.DONTWAIT)
            send(s, [P.encode_hello(1, 0, 1, [U])])
            send(s, data(1, 0, U, value(1, 0, U)))
            send(s, [P.encode_bye(1, 0, 1, 1)])
            samples = drain(buf)
            # the keyed client's three messages, sent after the plain one, were served:
            # the plain one, still connected, never arrived
            assert tel(rec, "messages") == 3
    check_stream(samples, {1: (range(1), [U], {})})


# -- the core without sockets -------------------------------------------------------------


def _ingest(rank: int = 0, world: int = 1, **kw: Any) -> tuple[Ingest, list[Sample], list[str]]:
    samples: list[Sample] = []
    ends: list[str] = []

    def put(sample: Sample) -> bool:
        samples.append(sample)
        return True

    options = dict(
        expected=1,
        max_field_bytes=1 << 20,
        max_pending=8,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 24,
        recent_size=16,
    )
    options.update(kw)
    return Ingest(rank, world, put=put, end=ends.append, **options), samples, ends


def _feed(ing: Ingest, frames: list[bytes]) -> None:
    msg = P.decode(frames[0], frames[1] if len(frames) > 1 else None)
    if isinstance(msg, P.Data):
        ing.data(msg, len(frames) == 1)
    elif isinstance(msg, P.Hello):
        ing.hello(msg)
    else:
        ing.bye(msg)


def test_one_receiver_finishes_whatever_the_step_numbering() -> None:
    ing, samples, ends = _ingest()
    _feed(ing, [P.encode_hello(1, 0, 1, [U])])
    for t in (0, 10, 20):
        _feed(ing, data(1, t, U, value(1, t, U)))
    _feed(ing, [P.encode_bye(1, 0, 1, 3)])
    assert ends and ing.finished_ids == [1] and len(samples) == 3


def test_each_of_several_receivers_expects_its_share_of_steps() -> None:
    for rank in range(3):
        ing, samples, ends = _ingest(rank, 3)
        mine = [t for t in range(7) if t % 3 == rank]
        _feed(ing, [P.encode_hello(1, 0, 1, [U])])
        _feed(ing, [P.encode_bye(1, 0, 1, len(mine))])  # may overtake data (other sockets)
        for t in mine:
            assert not ends
            _feed(ing, data(1, t, U, value(1, t, U)))
        assert ends, rank
        assert [int(s["time_step"]) for s in samples] == mine


def test_several_receivers_finish_whatever_the_step_numbering() -> None:
    """Every tenth step, two receivers: rank 0 gets all (even) steps, rank 1 none. Each
    BYE counts the steps sent to its receiver, so both finish (version 1's count over
    all receivers left both waiting for steps 2, 4... or 1, 3... that never come)."""
    steps = [0, 10, 20, 30]
    for rank, sent in ((0, steps), (1, [])):
        ing, samples, ends = _ingest(rank, 2)
        _feed(ing, [P.encode_hello(1, 0, 1, [U])])
        for t in sent:
            _feed(ing, data(1, t, U, value(1, t, U)))
        assert not ends
        _feed(ing, [P.encode_bye(1, 0, 1, len(sent))])
        assert ends and ing.finished_ids == [1], rank
        assert [int(s["time_step"]) for s in samples] == sent


def test_completed_steps_cost_a_bit_each() -> None:
    ing, _, _ = _ingest(expected=None)
    _feed(ing, [P.encode_hello(1, 0, 1, [U])])
    for t in range(5000):
        _feed(ing, data(1, t, U, value(1, 0, U)))
    assert 5000 / 8 <= len(ing.sims[1].done) <= 2 * 5000 / 8
    state = ing.state_dict()
    assert len(state["simulations"]["1"]["done"]) <= 4 * 2 * 5000 / 8 / 3 + 4


def test_memoized_inline_decoding_agrees_with_protocol_decode() -> None:
    decoder = DataDecoder(1 << 20)
    good = [data(1, t, U, value(1, t, U))[0] for t in range(3)]
    other = data(2, 7, U, value(2, 7, U), rank=1, count=2, start=6, end=12)[0]
    frames = [*good, other, other[:-4], good[0] + b"xx", good[1][:40], b"MTRN" + bytes(60)]
    frames += [P.encode_hello(1, 0, 1, [U]), P.encode_bye(1, 0, 1, 3), *good]
    for frame in frames:
        _assert_decodes_alike(decoder, frame, None)


def test_memoized_two_frame_decoding_agrees_with_protocol_decode() -> None:
    """DATA with a payload frame: a memo hit accepts and rejects exactly what `decode`
    does (wrong payload size, missing or extra frame, bytes after the header, an INLINE
    header of the same key given a payload frame, other fields)."""
    decoder = DataDecoder(1 << 20)

    def two(sim: int, t: int, **kw: Any) -> list[bytes]:
        return data(sim, t, U, value(sim, t, U), inline=False, **kw)

    good = [two(1, t) for t in range(3)]
    inline = data(1, 5, U, value(1, 5, U), inline=True)
    part = two(2, 7, rank=1, count=2, start=6, end=12)
    cases: list[tuple[bytes, Any]] = [(h, p) for h, p in good]
    cases += [(part[0], part[1]), (good[0][0], good[0][1][:-4]), (good[1][0], good[1][1] + b"x")]
    cases += [(good[2][0], None), (good[0][0] + b"xx", good[0][1]), (good[1][0][:-1], good[1][1])]
    cases += [(inline[0], None), (inline[0], good[0][1]), (good[0][0], b"")]
    cases += [(good[0][0][:-1] + b"v", good[0][1]), *((h, p) for h, p in good)]
    for frame, payload in cases:
        _assert_decodes_alike(decoder, frame, payload)


def _assert_decodes_alike(decoder: Any, frame: bytes, payload: bytes | None) -> None:
    """`decoder` accepts `frame` (and `payload`) as `protocol.decode` does, or rejects it
    for the same reason."""
    try:
        want: Any = P.decode(frame, payload, 1 << 20)
    except P.ProtocolError as exc:
        want = exc.reason
    try:
        got: Any = decoder(frame) if payload is None else decoder(frame, payload)
    except P.ProtocolError as exc:
        got = exc.reason
    if isinstance(want, P.Data):
        assert isinstance(got, P.Data) and bytes(got.payload) == bytes(want.payload)
        assert got[:9] == want[:9]
    else:
        assert got == want, (frame, payload)


# -- launcher control: ABANDON, heartbeat ----------------------------------------------------


@pytest.mark.timeout(30)
def test_abandoned_simulations_count_as_ended_once_and_keep_their_samples(
    tmp_path: Path,
) -> None:
    from melissa_trainer.stream.control import send_abandon

    buf = FIFOBuffer(100)
    with running(buf, expected_simulations=3, rendezvous_dir=tmp_path) as rec:
        with pushes(rec.endpoint) as (s,):
            for sim in (1, 2):
                send(s, [P.encode_hello(sim, 0, 1, [U])])
                send(s, data(sim, 0, U, value(sim, 0, U)))
            send(s, [P.encode_bye(1, 0, 1, 1)])  # 1 finished; 2 died after one step
            wait_until(lambda: rec.finished_simulations() == [1], "the condition", 10.0)
            send_abandon([rec.endpoint], 2)
            send_abandon([rec.endpoint], 2)  # twice: counted once
            send_abandon([rec.endpoint], 1)  # already finished: not counted
            wait_until(lambda: tel(rec, "simulations_abandoned") == 1, "the condition", 10.0)
            assert not buf.closed  # 1 finished + 1 abandoned < 3
            send_abandon([rec.endpoint], 7)  # died before its HELLO
            samples = drain(buf)  # ends: 1 finished + 2 abandoned
        assert sorted((int(x["simulation_id"]), int(x["time_step"])) for x in samples) == [
            (1, 0),
            (2, 0),
        ]
        assert tel(rec, "simulations_abandoned") == 2
        assert tel(rec, "simulations_finished") == 1
        assert tel(rec, "rejected") == 0
        assert sorted(rec.state_dict()["abandoned"]) == [2, 7]


def test_abandon_is_a_16_byte_prefix_and_other_sizes_are_rejected() -> None:
    frame = P.encode_abandon(42)
    assert len(frame) == 16 and frame[5] == P.ABANDON
    assert P.decode(frame) == P.Abandon(42)
    with pytest.raises(P.ProtocolError) as err:
        P.decode(frame + b"\0")
    assert err.value.reason == "bad_size"


def test_a_simulation_abandoned_then_finishing_is_not_counted_twice() -> None:
    ends: list[str] = []
    ing = Ingest(
        0,
        1,
        put=lambda s: True,
        end=ends.append,
        expected=2,
        max_field_bytes=1 << 20,
        max_pending=8,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 10,
        recent_size=8,
    )
    ing.hello(P.decode(P.encode_hello(1, 0, 1, [U])))
    ing.abandon(P.Abandon(1))
    ing.data(P.decode(data(1, 0, U, value(1, 0, U))[0]), True)
    ing.bye(P.decode(P.encode_bye(1, 0, 1, 1)))
    assert ing.simulations_finished == 1 and ing.simulations_abandoned == 0
    assert ends == []  # 1 ended of 2 expected
    assert ing.activity() == {1: 1}


@pytest.mark.timeout(30)
def test_activity_counts_data_messages_per_simulation_duplicates_included() -> None:
    with running() as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(5, 0, 1, [U])])
        for t in (0, 1, 1):
            send(s, data(5, t, U, value(5, t, U)))
        wait_until(lambda: tel(rec, "messages") == 4, "the condition", 10.0)
        assert rec.activity() == {5: 3}


# -- BATCH messages ---------------------------------------------------------------------------


def batch(
    sim: int,
    steps: list[int],
    spec: P.FieldSpec,
    start: int = 0,
    end: int | None = None,
    records: int | None = None,
    rank: int = 0,
    count: int = 1,
) -> list[bytes]:
    """One BATCH frame: `steps` of field `spec` (elements [start, end)) from `rank`."""
    size = int(np.prod(spec.shape))
    end = size if end is None else end
    head = P.encode_batch_header(
        sim,
        len(steps) if records is None else records,
        rank,
        count,
        spec.name.encode(),
        P.dtype_code(spec.dtype),
        spec.shape,
        start,
        end - start,
    )
    index = 1 if spec.name == "v" else 0  # as check_stream numbers the fields
    body = b"".join(
        t.to_bytes(8, "little") + value(sim, t, spec, index).reshape(-1)[start:end].tobytes()
        for t in steps
    )
    return [head + body]


@pytest.mark.timeout(30)
def test_batches_of_whole_fields_become_samples_exactly_once() -> None:
    buf = FIFOBuffer(100)
    with running(buf, expected_simulations=1) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U], {"a": 2.0})])
        send(s, batch(1, list(range(10)), U))
        send(s, batch(1, list(range(5, 15)), U))  # a restart re-sends 5..9
        send(s, [P.encode_bye(1, 0, 1, 15)])
        samples = drain(buf)
    check_stream(samples, {1: (range(15), [U], {"a": 2.0})})
    assert tel(rec, "duplicates") == 5 and tel(rec, "samples_put") == 15
    assert tel(rec, "messages") == 4 and tel(rec, "rejected") == 0
    for s_ in samples:  # each sample owns its memory: aligned, writable, not a view
        assert s_["u"].flags.owndata or s_["u"].base.flags.owndata
        assert s_["u"].flags.writeable and s_["u"].flags.aligned
        assert s_["u"].base is None or s_["u"].base.nbytes == s_["u"].nbytes


@pytest.mark.timeout(30)
def test_batches_that_need_assembly_or_checks_go_record_by_record() -> None:
    V = P.FieldSpec("v", np.dtype("<i8"), (5,))
    buf = FIFOBuffer(100)
    with (
        running(buf, expected_simulations=2, max_time_step=100, fields=None) as rec,
        pushes(rec.endpoint) as (s,),
    ):
        send(s, [P.encode_hello(1, 0, 1, [U, V])])  # two fields: assembled
        send(s, batch(1, [0, 1, 2], U))
        send(s, batch(1, [2, 1, 0], V))
        send(s, [P.encode_bye(1, 0, 1, 3)])
        send(s, [P.encode_hello(2, 0, 2, [U])])  # two client ranks, a part each
        send(s, batch(2, [0, 1], U, 0, 5, count=2))
        send(s, batch(2, [1, 0, 0], U, 5, 12, rank=1, count=2))  # step 0 twice
        send(s, batch(2, [3, 100], U, 0, 5, count=2))  # 100 >= max_time_step: that one only
        send(s, batch(2, [3], U, 5, 12, rank=1, count=2))
        send(s, batch(2, [4], U, 0, 12, rank=1, count=2, records=2))  # claims 2 records
        send(s, [P.encode_bye(2, 0, 2, 3)])
        send(s, [P.encode_bye(2, 1, 2, 3)])
        samples = drain(buf)
    check_stream(samples, {1: (range(3), [U, V], {}), 2: ([0, 1, 3], [U], {})})
    assert tel(rec, "rejected_bad_step") == 1 and tel(rec, "rejected_bad_size") == 1
    assert tel(rec, "duplicates") == 1 and tel(rec, "rejected") == 2


@pytest.mark.timeout(30)
def test_two_receivers_take_their_steps_of_a_batch_and_reject_the_others() -> None:
    bufs = [FIFOBuffer(100), FIFOBuffer(100)]
    recs = [Receiver(b, r, 2, ReceiverConfig(expected_simulations=1)) for r, b in enumerate(bufs)]
    for r in recs:
        r.start()
    try:
        with pushes(recs[0].endpoint) as (s0,), pushes(recs[1].endpoint) as (s1,):
            for sock in (s0, s1):
                send(sock, [P.encode_hello(1, 0, 1, [U])])
            send(s0, batch(1, [0, 2, 4], U))
            send(s1, batch(1, [1, 3, 4], U))  # 4 belongs to receiver 0
            send(s0, [P.encode_bye(1, 0, 1, 3)])  # the steps sent to each receiver
            send(s1, [P.encode_bye(1, 0, 1, 2)])
            got = [drain(b) for b in bufs]
        assert sorted(int(x["time_step"]) for x in got[0]) == [0, 2, 4]
        assert sorted(int(x["time_step"]) for x in got[1]) == [1, 3]
        assert tel(recs[1], "rejected_wrong_receiver") == 1
    finally:
        for r in recs:
            r.stop()


def test_batch_framing_is_validated() -> None:
    frame = batch(1, [3, 4], U)[0]
    msg = P.decode(frame)
    assert isinstance(msg, P.Batch) and msg.records == 2 and msg.steps.tolist() == [3, 4]
    assert msg.payloads.shape == (2, 12)
    assert msg.record(1).time_step == 4
    for bad, reason in (
        (frame[:-1], "bad_size"),
        (frame + b"\0", "bad_size"),
        (batch(1, [], U)[0], "bad_size"),
        (batch(1, [1], U, records=0)[0], "bad_size"),
    ):
        with pytest.raises(P.ProtocolError) as err:
            P.decode(bad)
        assert err.value.reason == reason
    with pytest.raises(P.ProtocolError) as err:
        P.decode(frame, b"extra")
    assert err.value.reason == "unexpected_frame"


def _sample_key(s: Sample) -> tuple[int, int, bytes, float]:
    return (int(s["simulation_id"]), int(s["time_step"]), s["u"].tobytes(), *s["parameters"])


@pytest.mark.parametrize("world", [1, 3])
def test_batches_take_the_same_path_to_the_buffer_as_records_one_by_one(world: int) -> None:
    """Random batches (in order, re-sent after a restart, shuffled, with steps of other
    receivers or repeated) put the same samples, count the same duplicates and rejects
    and leave the same dedup record as the same records sent one DATA at a time."""
    rng = np.random.default_rng(world)
    for trial in range(40):
        rank = trial % world
        via_batch, got_b, _ = _ingest(rank, world, expected=None, max_time_step=400)
        one_by_one, got_d, _ = _ingest(rank, world, expected=None, max_time_step=400)
        hello = [P.encode_hello(7, 0, 1, [U], {"a": 1.5, "b": -2.0})]
        _feed(via_batch, hello)
        _feed(one_by_one, hello)
        nxt = rank
        for _ in range(12):
            kind = rng.integers(5)
            k = int(rng.integers(1, 40))
            if kind <= 1:  # what a client sends: this receiver's next steps, in order
                steps = list(range(nxt, nxt + k * world, world))
            elif kind == 2:  # a restarted client: from an earlier step again
                start = rank + world * int(rng.integers(0, max(1, nxt // world + 1)))
                steps = list(range(start, start + k * world, world))
            elif kind == 3:  # any order, possibly other receivers' steps or out of range
                steps = rng.permutation(int(rng.integers(k, 420)))[:k].tolist()
            else:  # a step twice in one batch
                steps = [nxt, nxt + world, nxt]
            nxt = max(nxt, max(steps) + world) if kind <= 2 else nxt
            nxt += (rank - nxt) % world
            via_batch.batch(P.decode(batch(7, steps, U)[0]))
            for t in steps:
                _feed(one_by_one, data(7, t, U, value(7, t, U)))
        assert [_sample_key(x) for x in got_b] == [_sample_key(x) for x in got_d]
        for a, b in ((via_batch, one_by_one),):
            assert a.telemetry() | {"messages": 0} == b.telemetry() | {"messages": 0}
            ra, rb = a.sims[7], b.sims[7]
            assert ra.done.rstrip(b"\0") == rb.done.rstrip(b"\0")
            assert ra.completed == rb.completed == len(got_b)
            assert list(a.recent) == list(b.recent)
        for x in got_b:
            assert x["time_step"].shape == x["simulation_id"].shape == ()
            assert x["time_step"].dtype == x["simulation_id"].dtype == np.int64
            assert x["parameters"].dtype == np.float64
            memory: Any = x["u"]  # its own memory, not a piece of a received frame:
            while isinstance(memory, np.ndarray) and memory.base is not None:
                memory = memory.base  # a row of its own, or one of a few small rows
            shared = SHARED_ROWS * SMALL_ROW_BYTES
            nbytes = memoryview(memory).nbytes
            assert nbytes == x["u"].nbytes or nbytes <= shared
    x, y = got_b[0], got_b[1]
    x["time_step"] += 1000  # a sample's entries are its own, even where memory is shared
    x["parameters"][:] = 0
    assert int(y["time_step"]) < 1000 and y["parameters"].tolist() == [1.5, -2.0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=50), st.integers(0, 300), st.integers(1, 100))
def test_marking_a_range_is_marking_each_step(marked: list[int], gap: int, n: int) -> None:
    a_rec = StepLedger(1, 1, (U,), {})
    b_rec = StepLedger(1, 1, (U,), {})
    for i in sorted(set(marked)):
        a_rec.mark(i)
        b_rec.mark(i)
    start = a_rec.frontier + gap
    a_rec.mark_range(start, start + n)
    for i in range(start, start + n):
        b_rec.mark(i)
    assert a_rec.done.rstrip(b"\0") == b_rec.done.rstrip(b"\0")
    assert a_rec.completed == b_rec.completed and a_rec.frontier == b_rec.frontier == start + n
    restored = StepLedger.from_state(1, a_rec.to_state())
    assert restored.frontier == a_rec.frontier and restored.completed == a_rec.completed


# -- pumping from the training thread -----------------------------------------------------------


class ThreadRecordingFIFO(FIFOBuffer):
    """Records the thread that inserted each sample."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.threads: list[str] = []

    def put(self, sample: Sample, timeout: float | None = None) -> None:
        super().put(sample, timeout)
        self.threads.append(threading.current_thread().name)

    def put_available(self, samples: Any) -> int:
        n = super().put_available(samples)
        self.threads += [threading.current_thread().name] * n
        return n


@pytest.mark.timeout(30)
def test_pumping_ingests_in_the_calling_thread_and_the_thread_takes_over_when_it_stops() -> None:
    buf = ThreadRecordingFIFO(10_000)
    # takeover 1 s, not 0.3: a loaded machine can stall this thread between two pumps
    # for longer than 0.3 s, and the receiver's thread then ingests some of the 200
    with running(buf, tuning=ReceiverTuning(takeover=1.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(
            lambda: tel(rec, "messages") == 1, "the condition", 10.0
        )  # the thread took it: nobody pumps yet
        # pumps until one serves: the thread has seen them and left (a fixed sleep could
        # end before it did, or so late that the thread took the socket back)
        wait_until(rec.pump, "the condition", 10.0)
        for t in range(50):
            send(s, data(1, t, U, value(1, t, U)))
        send(s, batch(1, list(range(50, 200)), U))
        deadline = time.monotonic() + 10
        while tel(rec, "samples_put") < 200:
            rec.pump()
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert set(buf.threads) == {threading.current_thread().name}
        send(s, batch(1, list(range(200, 300)), U))  # no pump any more: the thread's turn
        wait_until(lambda: tel(rec, "samples_put") == 300, "the condition", 10.0)
        assert set(buf.threads[200:]) == {"melissa-receiver-0"}
        samples = buf.get_batch(300, timeout=5)
    assert [int(x["time_step"]) for x in samples] == list(range(300))


@pytest.mark.timeout(60)
def test_stop_wakes_the_thread_that_naps_while_pumps_come() -> None:
    """While the reader pumps, the receiver's thread naps between two looks at the
    pumps (up to `poll_interval`); `stop` wakes it. It slept its nap out before, so
    `stop` waited up to `poll_interval` (0.1 s by default) at the end of every training
    run, inside the timed window of issue 42's pinned row. Here the nap (30 s) outlasts
    `stop`'s bounded wait (5 s): a thread that does not wake is still alive after `stop`."""
    tuning = ReceiverTuning(poll_interval=30.0, takeover=600.0, stop_timeout=5.0)
    rec = Receiver(FIFOBuffer(100), tuning=tuning)
    rec.start()
    try:
        with pushes(rec.endpoint) as (s,):
            rec.pump()  # a pump came: the thread hands the socket over after a message
            send(s, [P.encode_hello(1, 0, 1, [U])])
            assert rec.pump(20.0)  # handed over (the lock is free): the thread naps
    finally:
        rec.stop()
    assert rec._thread is not None and not rec._thread.is_alive()
    assert tel(rec, "messages") == 1


@pytest.mark.timeout(30)
def test_a_pump_never_blocks_on_a_full_buffer_and_keeps_order() -> None:
    buf = FIFOBuffer(8)
    with running(buf, tuning=ReceiverTuning(takeover=5.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", 10.0)
        wait_until(
            rec.pump, "the condition", 10.0
        )  # served: the thread has left, and stays idle from now on
        send(s, batch(1, list(range(40)), U))
        got: list[int] = []
        deadline = time.monotonic() + 10
        while len(got) < 40:
            start = time.monotonic()
            rec.pump()
            assert time.monotonic() - start < 1.0  # returned: did not wait for room
            got += [int(x["time_step"]) for x in buf.get_batch(8, timeout=0.05)] if len(buf) else []
            assert time.monotonic() < deadline
        assert got == list(range(40))
        assert tel(rec, "samples_put") == 40 and tel(rec, "duplicates") == 0


@pytest.mark.timeout(30)
def test_a_reader_waiting_for_data_ingests_it_itself() -> None:
    """The dataset waits in short slices and pumps between them: what arrives while the
    training thread waits is ingested by that thread at once, not after `takeover`."""
    from melissa_trainer.core.dataset import StreamDataset
    from melissa_trainer.stream.stream_source import StreamSource

    buf = ThreadRecordingFIFO(100)
    # the receiver thread would wait 30 s to step in
    source = StreamSource(tuning=ReceiverTuning(takeover=30.0))
    source.start(buf, 0, 1)
    try:
        assert source.endpoint is not None
        dataset = StreamDataset(buf, 4, source=source)
        with pushes(source.endpoint) as (s,):
            send(s, [P.encode_hello(1, 0, 1, [U])])
            receiver = source.receiver
            assert receiver is not None
            # pumps until one serves: the thread has seen them and stays idle from now
            # on (after a fixed sleep it could still hold the socket on a loaded machine)
            wait_until(receiver.pump, "the condition", 10.0)
            sender = threading.Timer(
                0.3, lambda: send(s, batch(1, [0, 1, 2, 3], U))
            )  # arrives while prefetch waits
            sender.start()
            assert dataset.prefetch(1) == 1  # (the thread would wait 30 s: the timeout)
            sender.join()
        assert buf.threads == [threading.current_thread().name] * 4
    finally:
        source.stop()


@pytest.mark.timeout(30)
def test_a_waiting_pump_ingests_a_message_as_it_arrives() -> None:
    """`pump(wait)` waits on the socket, not the buffer: a message that arrives while
    it waits is ingested by the caller before the call returns, and it returns then."""
    buf = ThreadRecordingFIFO(100)
    with running(buf, tuning=ReceiverTuning(takeover=30.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", 10.0)
        # pumps until one serves (False while the thread, serving, holds the socket): the
        # thread has seen them and stays idle from now on (a fixed sleep could end first)
        wait_until(rec.pump, "the condition", 10.0)
        assert rec.pump(0.05) is True and len(buf) == 0  # nothing came: waited, returned
        sender = threading.Timer(0.3, lambda: send(s, batch(1, [0, 1, 2], U)))
        sender.start()
        start = time.monotonic()
        assert rec.pump(20.0) is True
        waited = time.monotonic() - start
        sender.join()
        assert len(buf) == 3  # ingested within the call, by this thread
        assert buf.threads == [threading.current_thread().name] * 3
        assert waited < 15.0  # it returned on the message, not at the end of its wait
    assert rec.pump(1.0) is False  # stopped: nothing to serve


@pytest.mark.timeout(30)
def test_a_waiting_pump_polls_once_to_wait_and_once_to_find_the_socket_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pump that may wait asks the socket once, waiting (a message that waits already
    answers at once), and once more after what it ingested: no empty poll before the
    wait (it cost a `zmq_poll` and an idle tick per message where the reader waits for
    each). A wait that ends empty still tells the idle clock."""
    buf = ThreadRecordingFIFO(100)
    with running(buf, tuning=ReceiverTuning(takeover=30.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", 10.0)
        wait_until(rec.pump, "the condition", 10.0)  # the thread stays idle from now on (see above)
        timeouts: list[int] = []
        real = zmq.zmq_poll

        def counting(items: Any, timeout: int = -1) -> Any:
            timeouts.append(timeout)
            return real(items, timeout)

        monkeypatch.setattr(zmq, "zmq_poll", counting)
        sender = threading.Timer(0.3, lambda: send(s, batch(1, [0, 1, 2], U)))
        sender.start()
        assert rec.pump(20.0) is True
        sender.join()
        assert len(buf) == 3
        assert timeouts == [20_000, 0]  # the wait (the message came), then empty
        timeouts.clear()
        assert rec.pump(0.05) is True and rec.pump(0.05) is True  # nothing comes
        assert timeouts == [50, 50]
        assert rec.idle_seconds() >= 0.04  # both empty waits reached the idle clock


@pytest.mark.timeout(30)
def test_a_waiting_pump_takes_the_socket_over_from_the_serving_thread() -> None:
    """Nobody pumped for long: the thread holds the socket. A pump that may wait waits
    for the thread to hand it over (within `poll_interval`), then serves (it returned
    False at once before, and the reader had to wait on the buffer)."""
    buf = ThreadRecordingFIFO(100)
    with running(buf, tuning=ReceiverTuning(takeover=30.0)) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U])])
        wait_until(lambda: tel(rec, "messages") == 1, "the condition", 10.0)  # the thread serves
        start = time.monotonic()
        assert rec.pump(5.0) is True
        assert time.monotonic() - start < 4.0  # handed over, not timed out
        # the pump holds the socket now (it returned True): the thread, which serves only
        # `takeover` (30 s) after the last pump, cannot take the next message
        send(s, batch(1, [0, 1], U))
        wait_until(lambda: rec.pump() and len(buf) == 2, "the condition", 10.0)
        assert buf.threads == [threading.current_thread().name] * 2


@pytest.mark.timeout(30)
def test_wait_for_ingests_until_the_buffer_holds_n_samples() -> None:
    """`StreamSource.wait_for(n, t)` goes on ingesting what arrives until the buffer
    can serve `n` (not only the first message), and says when the receiver failed."""
    from melissa_trainer.stream.stream_source import StreamSource

    buf = ThreadRecordingFIFO(100)
    source = StreamSource(tuning=ReceiverTuning(takeover=30.0))
    source.start(buf, 0, 1)
    try:
        assert source.endpoint is not None
        with pushes(source.endpoint) as (s,):
            send(s, [P.encode_hello(1, 0, 1, [U])])
            source.wait_for(4, 1.0)  # the HELLO: no sample, waits out its timeout
            assert len(buf) == 0
            senders = [
                threading.Timer(delay, lambda t=t: send(s, batch(1, [2 * t, 2 * t + 1], U)))
                for t, delay in enumerate((0.2, 0.5))
            ]
            for sender in senders:
                sender.start()
            start = time.monotonic()
            source.wait_for(4, 20.0)
            assert len(buf) == 4 and time.monotonic() - start < 15.0
            for sender in senders:
                sender.join()
        assert buf.threads == [threading.current_thread().name] * 4
        source.receiver._error = RuntimeError("boom")  # type: ignore[union-attr]
        with pytest.raises(SourceError, match="boom"):
            source.wait_for(4, 0.0)
    finally:
        source.stop()


@pytest.mark.timeout(30)
def test_abandon_reaches_receivers_with_keys_of_their_own(tmp_path: Path) -> None:
    """Two ranks with different CURVE keys (two nodes, each its own secret): ABANDON
    goes to each with its own key, as each publishes it in the rendezvous (with rank
    0's key for both, rank 1 would never hear it: its handshake fails, silently)."""
    from melissa_trainer.stream.control import send_abandon
    from melissa_trainer.stream.endpoints import fetch_rendezvous

    secrets = [zmq.curve_keypair()[1].decode() for _ in range(2)]
    config = dict(expected_simulations=2, rendezvous_dir=tmp_path, bind="tcp://127.0.0.1:*")
    with (
        running(FIFOBuffer(10), 0, 2, curve_secret_key=secrets[0], **config) as r0,
        running(FIFOBuffer(10), 1, 2, curve_secret_key=secrets[1], **config) as r1,
    ):
        entries = fetch_rendezvous(tmp_path, timeout=5.0)
        keys = [e["curve_public_key"] for e in entries]
        assert keys == [r0.curve_public_key, r1.curve_public_key] and keys[0] != keys[1]
        endpoints = [e["endpoint"] for e in entries]
        send_abandon(endpoints, 4, curve_public_key=keys, timeout=5.0)
        wait_until(lambda: tel(r0, "simulations_abandoned") == 1, "the condition", 10.0)
        wait_until(lambda: tel(r1, "simulations_abandoned") == 1, "the condition", 10.0)
        with pytest.raises(ValueError, match="1 CURVE keys for 2 endpoints"):
            send_abandon(endpoints, 5, curve_public_key=keys[:1])


@pytest.mark.timeout(30)
def test_a_port_in_use_names_the_fix() -> None:
    taken = zmq.Context.instance().socket(zmq.PULL)
    try:
        port = taken.bind_to_random_port("tcp://127.0.0.1")
        rec = Receiver(FIFOBuffer(4), config=ReceiverConfig(bind=f"tcp://127.0.0.1:{port}"))
        with pytest.raises(OSError) as info:
            rec.start()
        rec.stop()
    finally:
        taken.close(linger=0)
    text = str(info.value)
    assert info.value.errno == errno.EADDRINUSE
    assert f"cannot bind tcp://127.0.0.1:{port}" in text and f"sport = :{port}" in text
    assert "choose a free port in ReceiverConfig(bind=...)" in text and "port *" in text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("in_place", [True, False])
def test_a_large_batch_read_in_its_frame_gives_what_a_copy_gives(
    in_place: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BATCH of at least `data_path._VIEW_MIN` bytes is read in the frame's memory, not
    copied into bytes first: the same samples (owning their memory), the same verdicts
    on malformed ones (rejected, counted, named by their simulation), either way."""
    from melissa_trainer.stream import data_path

    monkeypatch.setattr(data_path, "_VIEW_MIN", 64 if in_place else 1 << 40)
    big = batch(1, list(range(200)), U)[0]  # 200 x (8 + 48) bytes: above 4096
    assert len(big) >= 4096
    buf = FIFOBuffer(1000)
    with running(buf, expected_simulations=1) as rec, pushes(rec.endpoint) as (s,):
        send(s, [P.encode_hello(1, 0, 1, [U], {"a": 2.0})])
        send(s, [big[:-1]])  # truncated: rejected, never decoded as records
        send(s, [batch(1, list(range(200, 300)), U, records=101)[0]])  # one record short
        send(s, [big])
        send(s, batch(1, list(range(150, 300)), U))  # a restart re-sends 150..199
        send(s, [P.encode_bye(1, 0, 1, 300)])
        samples = drain(buf)
    check_stream(samples, {1: (range(300), [U], {"a": 2.0})})
    assert tel(rec, "rejected_bad_size") == 2 and tel(rec, "rejected") == 2
    assert tel(rec, "duplicates") == 50 and tel(rec, "samples_put") == 300
    for s_ in samples:  # each sample owns its memory: not a view of a frame
        assert s_["u"].flags.writeable and s_["u"].flags.aligned
        assert s_["u"].base is None or s_["u"].base.nbytes == s_["u"].nbytes
