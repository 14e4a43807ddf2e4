"""The client API against real PULL sockets on 127.0.0.1, decoded with protocol.decode."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from helpers import NO_MPI, find_mpiexec
from hypothesis import given, settings
from hypothesis import strategies as st

from melissa_trainer import wire as p
from melissa_trainer.client import (
    ENV_ENDPOINTS,
    ENV_PARAMETERS,
    ENV_RENDEZVOUS,
    ENV_SIMULATION_ID,
    INLINE_MAX_BYTES,
    Client,
    ClientTuning,
    fetch_endpoints,
)
from melissa_trainer.client import held as held_module
from melissa_trainer.client.config import check_parameters
from melissa_trainer.stream.endpoints import write_rendezvous
from melissa_trainer.stream.step_set import StepSet

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stream"))
from test_protocol import spec_dump  # noqa: E402  (tests/stream/: the spec's hex dumps)

SCRIPTS = Path(__file__).parents[1] / "scripts"


class Receiver:
    """A PULL socket bound on 127.0.0.1; `recv` decodes one message (payloads copied)."""

    def __init__(self, ctx: zmq.Context, **options: int) -> None:
        self.sock = ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        for option, value in options.items():
            self.sock.setsockopt(getattr(zmq, option), value)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.frames: list[int] = []  # frames per message received
        self.raw: list[list[bytes]] = []  # the frames' bytes
        self.pending: list[p.Message] = []  # decoded, not returned yet
        self.batches = 0  # BATCH messages received

    def recv(self, timeout: float = 5.0) -> p.Message:
        """The next message. Frames are read as the receiver reads them (only a DATA
        header without INLINE takes the next frame as its payload); a BATCH is returned
        as its records, one DATA per call."""
        if self.pending:
            return self.pending.pop(0)
        if not self.sock.poll(int(timeout * 1000)):
            raise AssertionError(f"nothing received within {timeout} s")
        frames = self.sock.recv_multipart(copy=False)
        self.frames.append(len(frames))
        self.raw.append([f.bytes for f in frames])
        i = 0
        while i < len(frames):
            head = frames[i].bytes
            two = head[5] == p.DATA and not head[6] & p.FLAG_INLINE and i + 1 < len(frames)
            msg = p.decode(frames[i].buffer, frames[i + 1].buffer if two else None)
            i += 2 if two else 1
            if isinstance(msg, p.Batch):
                self.batches += 1
                records = [msg.record(k) for k in range(msg.records)]
                self.pending += [r._replace(payload=r.payload.copy()) for r in records]
            elif isinstance(msg, p.Data):
                payload = np.frombuffer(bytes(msg.payload), msg.dtype)
                self.pending.append(msg._replace(payload=payload))
            else:
                self.pending.append(msg)
        return self.pending.pop(0)

    def recv_data(self, timeout: float = 5.0) -> p.Data:
        msg = self.recv(timeout)
        assert isinstance(msg, p.Data), msg
        return msg

    def until_bye(self, byes: int = 1, timeout: float = 10.0) -> list[p.Message]:
        out: list[p.Message] = []
        while byes:
            out.append(self.recv(timeout))
            byes -= isinstance(out[-1], p.Bye)
        return out

    def assert_silent(self, wait: float = 0.2) -> None:
        assert not self.sock.poll(int(wait * 1000)), "an unexpected message arrived"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SIMULATION_ID, ENV_ENDPOINTS, ENV_RENDEZVOUS):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def zctx() -> Iterator[zmq.Context]:
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture
def receiver(zctx: zmq.Context) -> Receiver:
    return Receiver(zctx)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- data arrives intact --------------------------------------------------------------

FIELDS: dict[str, tuple[tuple[int, ...], str]] = {
    "small_f4": ((4, 3), "float32"),
    "inline_max": ((INLINE_MAX_BYTES // 8,), "float64"),  # exactly 64 KiB: one frame
    "just_over": ((INLINE_MAX_BYTES // 8 + 1,), "float64"),  # 64 KiB + 8: two frames
    "large_f4": ((256, 300), "float32"),
    "scalar_i8": ((), "int64"),
    "flags": ((2, 3, 4), "bool"),
    "bytes_u1": ((70_000,), "uint8"),
    "half": ((5,), "float16"),
    "i1": ((3, 1, 2), "int8"),
    "u8": ((1, 1, 1, 1, 1, 1, 1, 9), "uint64"),
}


def random_field(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize)
    arr = raw.astype(np.uint8).view(dtype).reshape(shape)
    return arr != 0 if dtype == "bool" else arr


@pytest.mark.timeout(30)
def test_fields_arrive_intact(receiver: Receiver) -> None:
    rng = np.random.default_rng(0)
    sent = {}
    with Client(
        FIELDS,
        simulation_id=3,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10, batch_bytes=0),
    ) as c:  # one DATA per field and step: the framing is what this test checks
        for step in (0, 1, 7):
            sent[step] = {n: random_field(rng, *decl) for n, decl in FIELDS.items()}
            c.send(step, **sent[step])
    messages = receiver.until_bye()
    hello, data, bye = messages[0], messages[1:-1], messages[-1]
    assert isinstance(hello, p.Hello)
    assert [(f.name, f.shape, f.dtype) for f in hello.fields] == [
        (n, s, np.dtype(d)) for n, (s, d) in FIELDS.items()
    ]
    assert bye == p.Bye(3, 0, 1, 3)
    assert len(data) == 3 * len(FIELDS)
    for msg in data:
        assert isinstance(msg, p.Data)
        expected = sent[msg.time_step][msg.name]
        assert (msg.simulation_id, msg.client_rank, msg.client_count) == (3, 0, 1)
        assert (msg.shape, msg.dtype, msg.offset, msg.elements) == (
            expected.shape,
            expected.dtype,
            0,
            expected.size,
        )
        assert msg.payload.tobytes() == expected.tobytes()
    frames = {
        (m.time_step, m.name): f
        for m, f in zip(messages, receiver.frames, strict=True)
        if isinstance(m, p.Data)
    }
    for name, (shape, dtype) in FIELDS.items():
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        assert frames[0, name] == (1 if nbytes <= INLINE_MAX_BYTES else 2), name
    assert receiver.frames[0] == receiver.frames[-1] == 1  # HELLO and BYE


@pytest.mark.timeout(30)
def test_hello_and_bye(receiver: Receiver) -> None:
    params = {"zeta": 1, "alpha": -2.5, "mid": 1e-300}
    with Client(
        [p.FieldSpec("x", np.dtype("<i2"), (2,))],
        params,
        simulation_id=2**64 - 1,
        endpoints=[receiver.endpoint],
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        for step in (0, 1, 1, 5, 0):  # 3 distinct time steps
            c.send(step, x=np.array([step, -step], dtype=np.int16))
        assert c.steps_sent == 3
    messages = receiver.until_bye()
    hello = messages[0]
    assert isinstance(hello, p.Hello)
    assert hello.simulation_id == 2**64 - 1 and (hello.client_rank, hello.client_count) == (0, 1)
    assert list(hello.parameters.items()) == [("zeta", 1.0), ("alpha", -2.5), ("mid", 1e-300)]
    assert [m.time_step for m in messages[1:-1]] == [0, 1, 1, 5, 0]  # type: ignore[union-attr]
    assert messages[-1] == p.Bye(2**64 - 1, 0, 1, 3)


@pytest.mark.timeout(30)
def test_mapping_numpy_integers_and_non_contiguous(receiver: Receiver) -> None:
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    fields = {"t": ((10, 6), "float64"), "s": ((3, 5), "<f8"), "be": ((4,), "int32")}
    big_endian = np.array([1, -2, 3, 2**30], dtype=">i4")
    with Client(
        fields, simulation_id=1, endpoints=receiver.endpoint, tuning=ClientTuning(close_timeout=10)
    ) as c:
        c.send(np.uint8(4), {"t": base.T, "s": base[::2, ::2]}, be=big_endian)
        assert base.T.flags.f_contiguous  # the caller's arrays are left as they were
    messages = receiver.until_bye()
    data = {m.name: m for m in messages if isinstance(m, p.Data)}
    assert data["t"].time_step == 4
    assert np.array_equal(data["t"].payload.reshape(10, 6), base.T)
    assert np.array_equal(data["s"].payload.reshape(3, 5), base[::2, ::2])
    assert data["be"].dtype == np.dtype("<i4")
    assert data["be"].payload.tolist() == [1, -2, 3, 2**30]


@pytest.mark.timeout(30)
def test_large_array_may_be_overwritten_once_send_returns(receiver: Receiver) -> None:
    """The zero-copy path returns only when ZeroMQ is done with the array."""
    buf = np.empty((512, 512), dtype=np.float64)  # 2 MiB, two frames
    with Client(
        {"u": ((512, 512), "f8")},
        simulation_id=1,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        for step in range(8):
            buf.fill(step)
            c.send(step, u=buf)
        buf.fill(-1)
    for msg in receiver.until_bye()[1:-1]:
        assert isinstance(msg, p.Data)
        assert np.all(msg.payload == msg.time_step), msg.time_step


@pytest.mark.timeout(30)
def test_a_large_array_left_queued_by_a_timeout_is_waited_for_by_flush(
    zctx: zmq.Context,
) -> None:
    """A send that timed out waiting for ZeroMQ to release its array leaves it queued:
    `flush` (or the next send) returns only once it is released."""
    port = free_port()  # nobody listens yet: the message stays queued
    endpoint = f"tcp://127.0.0.1:{port}"
    array = np.full(TWO_FRAME_SHAPE, 1.0)
    with Client({"u": (TWO_FRAME_SHAPE, "f8")}, None, 8, endpoint, send_timeout=0.3) as c:
        with pytest.raises(TimeoutError, match="time step 0"):
            c.send(0, u=array)
        with pytest.raises(TimeoutError, match="a message"):
            c.flush()  # the array is still ZeroMQ's
        receiver = Receiver(zctx)
        receiver.sock.unbind(receiver.endpoint)
        receiver.sock.bind(endpoint)
        c.flush()  # returns once delivered: the array is the caller's again
        array.fill(-1)
    data = [m for m in receiver.until_bye() if isinstance(m, p.Data)]
    assert [m.time_step for m in data] == [0] and np.all(data[0].payload == 1.0)


@pytest.mark.timeout(30)
def test_overlapped_sends_give_an_array_back_at_the_next_send(zctx: zmq.Context) -> None:
    """With array_reuse="next_send", `send` returns with its large array still queued; the next
    `send` (or `flush`) returns once ZeroMQ is done with it. A double-buffered code
    (step t written into the array of step t-2) then streams every step intact."""
    port = free_port()  # nobody listens yet: the first large message stays queued
    shape, spec = TWO_FRAME_SHAPE, {"u": (TWO_FRAME_SHAPE, "f8")}
    arrays = [np.full(shape, 0.0), np.empty(shape)]
    endpoint = f"tcp://127.0.0.1:{port}"
    with Client(
        spec, None, 3, endpoint, send_timeout=0.3, tuning=ClientTuning(close_timeout=0.1)
    ) as plain:
        with pytest.raises(TimeoutError, match="time step 0"):
            plain.send(0, u=arrays[0])  # waits for the array: nobody takes it
        plain.close(bye=False)  # (its messages are dropped)
    # 2 s, not 0.3: once the receiver is there, each send waits for ZeroMQ to be done
    # with the array of the step before, a wait that took over 0.3 s on a loaded machine
    with Client(spec, None, 3, endpoint, send_timeout=2.0, array_reuse="next_send") as c:
        c.send(0, u=arrays[0])  # returns: the array is only queued
        with pytest.raises(TimeoutError, match="a message"):
            c.flush()  # ... and still ZeroMQ's
        receiver = Receiver(zctx)
        receiver.sock.unbind(receiver.endpoint)
        receiver.sock.bind(f"tcp://127.0.0.1:{port}")
        # the client reconnected (its backoff) and its first message came: what follows
        # waits only for transfers on a live connection
        assert receiver.sock.poll(30_000), "the client never reached the receiver"
        for step in range(1, 8):
            arrays[step % 2].fill(step)  # the array of step - 2: the caller's again
            c.send(step, u=arrays[step % 2])
        c.flush()
        arrays[0].fill(-1)
        arrays[1].fill(-1)
    messages = receiver.until_bye()
    data = [m for m in messages if isinstance(m, p.Data)]
    assert [m.time_step for m in data] == list(range(8))
    assert all(np.all(m.payload == m.time_step) for m in data)
    assert messages[-1] == p.Bye(3, 0, 1, 8)


@pytest.mark.timeout(30)
def test_handed_over_arrays_are_not_waited_for_and_become_read_only(zctx: zmq.Context) -> None:
    """With array_reuse="never", `send` returns with its large arrays still queued and
    never waits for them; each becomes read-only (a write by mistake raises instead of
    changing a message in flight), and every step arrives as it was sent."""
    port = free_port()  # nobody listens yet: every large message stays queued
    endpoint = f"tcp://127.0.0.1:{port}"
    with Client(
        {"u": (TWO_FRAME_SHAPE, "f8")}, None, 4, endpoint, send_timeout=0.3, array_reuse="never"
    ) as c:
        sent = []
        for step in range(5):  # 5 MiB queued: under HELD_BYTES_MAX, no wait
            u = np.full(TWO_FRAME_SHAPE, float(step))
            c.send(step, u=u)
            sent.append(u)
        assert not any(u.flags.writeable for u in sent)
        with pytest.raises(ValueError, match="read-only"):
            sent[0][0, 0] = -1.0
        receiver = Receiver(zctx)
        receiver.sock.unbind(receiver.endpoint)
        receiver.sock.bind(endpoint)
    data = [m for m in receiver.until_bye() if isinstance(m, p.Data)]
    assert [m.time_step for m in data] == list(range(5))
    assert all(np.all(m.payload == m.time_step) for m in data)


@pytest.mark.timeout(30)
def test_handed_over_arrays_queued_are_bounded_in_bytes(
    zctx: zmq.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With array_reuse="never", a send waits for the oldest arrays once more than
    HELD_BYTES_MAX of earlier sends' arrays are queued (never for its own): memory
    stays bounded when the trainer does not receive."""
    monkeypatch.setattr(held_module, "HELD_BYTES_MAX", 3 << 20)  # three 1 MiB arrays
    port = free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    big = {"u": (TWO_FRAME_SHAPE, "f8")}
    with Client(big, None, 5, endpoint, send_timeout=0.3, array_reuse="never") as c:
        for step in range(4):  # the 4th send's own array is not waited for
            c.send(step, u=np.zeros(TWO_FRAME_SHAPE))
        with pytest.raises(TimeoutError, match="time step 4"):
            c.send(4, u=np.zeros(TWO_FRAME_SHAPE))  # 4 MiB earlier: waits, nobody reads
        receiver = Receiver(zctx)
        receiver.sock.unbind(receiver.endpoint)
        receiver.sock.bind(endpoint)
        c.send(5, u=np.zeros(TWO_FRAME_SHAPE))  # the queue drains: no wait now
    data = [m for m in receiver.until_bye() if isinstance(m, p.Data)]
    assert [m.time_step for m in data] == list(range(6))  # the timed-out one was queued


def test_array_reuse_must_be_a_known_mode() -> None:
    """A misspelt mode fails at once (before any socket), naming the modes."""
    with pytest.raises(ValueError, match="array_reuse must be one of.*'overlap'"):
        Client({"u": ((4,), "f8")}, None, 1, "tcp://127.0.0.1:1", array_reuse="overlap")


# -- configuration --------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_missing_parameter_names_the_known_ones_or_how_to_give_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_PARAMETERS, raising=False)
    none = check_parameters(None)  # a simulation started by hand, without the launcher
    with pytest.raises(KeyError) as info:
        none["diffusivity"]
    assert str(info.value).startswith("this simulation has no parameter 'diffusivity': it has none")
    assert "MELISSA_TRAINER_PARAMETERS='{\"diffusivity\": 0.5}'" in str(info.value)
    given = check_parameters({"t0": 1.0})
    assert given == {"t0": 1.0} and given.get("k") is None and json.dumps(given) == '{"t0": 1.0}'
    with pytest.raises(KeyError, match=r"its parameters are \['t0'\] \(given to the Client\)"):
        given["k"]


@pytest.mark.timeout(30)
def test_parameters_that_are_not_json_say_where(monkeypatch: pytest.MonkeyPatch) -> None:
    # set by hand in external mode, a trailing comma was "is not valid JSON" and nothing
    # more; the C client names the spot, and the value is shown so a shell's quoting shows
    monkeypatch.setenv(ENV_PARAMETERS, '{"k": 0.5,}')
    with pytest.raises(ValueError) as info:
        check_parameters(None)
    message = str(info.value)
    assert message.startswith("MELISSA_TRAINER_PARAMETERS is not valid JSON (")
    assert "at character 10" in message and "'{\"k\": 0.5,}'" in message


@pytest.mark.timeout(30)
def test_environment_configuration(
    receiver: Receiver, zctx: zmq.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_SIMULATION_ID, " 17 ")
    monkeypatch.setenv(ENV_ENDPOINTS, f" {receiver.endpoint} ")
    monkeypatch.setenv(ENV_RENDEZVOUS, "/nonexistent")  # ENDPOINTS comes first
    monkeypatch.setenv(ENV_PARAMETERS, '{"b": 2.5, "a": -1}')  # as the launcher sets it
    with Client({"u": ((2,), "float32")}, tuning=ClientTuning(close_timeout=10)) as c:
        assert (c.simulation_id, c.endpoints) == (17, [receiver.endpoint])
        assert list(c.parameters.items()) == [("b", 2.5), ("a", -1.0)]
        with pytest.raises(
            KeyError,
            match=r"no parameter 'k': its parameters are \['a', 'b'\] "
            r"\(from MELISSA_TRAINER_PARAMETERS, set by the launcher\)",
        ):
            c.parameters["k"]  # a typo names the parameters there are
        c.send(0, u=np.zeros(2, np.float32))
    messages = receiver.until_bye()
    assert [type(m) for m in messages] == [p.Hello, p.Data, p.Bye]
    assert messages[0].parameters == {"b": 2.5, "a": -1.0}
    # arguments win over the environment
    other = Receiver(zctx)
    with Client(
        {"u": ((2,), "float32")},
        simulation_id=5,
        endpoints=other.endpoint,
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        c.send(0, u=np.zeros(2, np.float32))
    assert other.recv().simulation_id == 5
    receiver.assert_silent(0.05)


def write_rank_file(directory: Path, rank: int, world: int, endpoint: str) -> None:
    """As a receiver does: a temporary file, then a rename."""
    tmp = directory / f".rank_{rank}.json.tmp"
    tmp.write_text(
        json.dumps({"version": 1, "rank": rank, "world_size": world, "endpoint": endpoint})
    )
    os.replace(tmp, directory / f"rank_{rank}.json")


@pytest.mark.timeout(30)
def test_rendezvous_directory_waits_for_late_receivers(
    zctx: zmq.Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receivers = [Receiver(zctx), Receiver(zctx)]
    write_rank_file(tmp_path, 0, 2, receivers[0].endpoint)
    (tmp_path / "rank_1.json.tmp").write_text("{half a fi")  # ignored: not rank_N.json
    (tmp_path / "notes.txt").write_text("ignored")
    late = threading.Timer(0.3, write_rank_file, (tmp_path, 1, 2, receivers[1].endpoint))
    late.start()
    monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
    try:
        started = time.monotonic()
        client = Client({"u": ((1,), "u1")}, simulation_id=9, tuning=ClientTuning(close_timeout=10))
        assert time.monotonic() - started >= 0.25
    finally:
        late.cancel()
    with client:
        assert client.endpoints == [r.endpoint for r in receivers]
        client.send(0, u=np.array([0], np.uint8))
        client.send(1, u=np.array([1], np.uint8))
    for rank, rec in enumerate(receivers):
        hello, data, bye = rec.until_bye()
        assert isinstance(hello, p.Hello) and isinstance(data, p.Data)
        assert data.time_step == rank and bye == p.Bye(9, 0, 1, 1)  # one step each


@pytest.mark.timeout(30)
def test_fetch_endpoints_errors(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError, match="does not exist"):
        fetch_endpoints(tmp_path / "missing", timeout=0.05)
    with pytest.raises(TimeoutError, match="no rank_"):
        fetch_endpoints(tmp_path, timeout=0.05)
    write_rank_file(tmp_path, 0, 2, "tcp://a:1")
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"world_size 2, ranks \[1\] missing"):
        fetch_endpoints(tmp_path, timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 2
    write_rank_file(tmp_path, 1, 3, "tcp://b:1")  # a stale file of another run
    with pytest.raises(TimeoutError, match="disagree on world_size"):
        fetch_endpoints(tmp_path, timeout=0.05)
    write_rank_file(tmp_path, 1, 2, "tcp://b:1")
    assert fetch_endpoints(tmp_path, timeout=0) == ["tcp://a:1", "tcp://b:1"]
    (tmp_path / "rank_1.json").write_text("{not json")
    with pytest.raises(TimeoutError, match="rank_1.json unreadable"):
        fetch_endpoints(tmp_path, timeout=0.05)
    (tmp_path / "rank_1.json").write_text(json.dumps({"version": 1, "rank": 1}))
    with pytest.raises(TimeoutError, match="rank_1.json unreadable"):  # no world_size
        fetch_endpoints(tmp_path, timeout=0.05)
    (tmp_path / "rank_1.json").write_text(
        json.dumps({"version": 1, "rank": 0, "world_size": 2, "endpoint": "tcp://b:1"})
    )
    with pytest.raises(TimeoutError, match="rank_1.json invalid"):  # not its name's rank
        fetch_endpoints(tmp_path, timeout=0.05)
    write_rank_file(tmp_path, 1, 2, "tcp://b:1")
    (tmp_path / "rank_1.json").write_text(
        json.dumps({"version": 2, "rank": 1, "world_size": 2, "endpoint": "tcp://b:1"})
    )
    with pytest.raises(TimeoutError, match="rank_1.json invalid"):
        fetch_endpoints(tmp_path, timeout=0.05)


@pytest.mark.timeout(30)
@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_a_client_uses_the_curve_key_its_rendezvous_publishes(
    zctx: zmq.Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver with CURVE (the documented way across nodes) publishes its public key
    beside its endpoint; a client configured by the launcher's environment uses it, or
    its HELLO would never pass the handshake."""
    public, secret = zmq.curve_keypair()
    receiver = Receiver(zctx, CURVE_SERVER=1, CURVE_SECRETKEY=secret)
    write_rendezvous(tmp_path, 0, 1, receiver.endpoint, {"curve_public_key": public.decode()})
    monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
    with Client({"u": ((1,), "uint8")}, simulation_id=4) as client:
        client.send(0, u=np.array([7], np.uint8))
    hello, data, bye = receiver.until_bye()
    assert isinstance(hello, p.Hello) and hello.simulation_id == 4
    assert isinstance(data, p.Data) and bye == p.Bye(4, 0, 1, 1)
    write_rendezvous(tmp_path, 0, 1, receiver.endpoint, {"curve_public_key": "short"})
    with pytest.raises(TimeoutError, match="rank_0.json invalid"):
        fetch_endpoints(tmp_path, timeout=0.05)


@pytest.mark.timeout(30)
def test_routing_to_two_receivers(zctx: zmq.Context) -> None:
    receivers = [Receiver(zctx), Receiver(zctx)]
    endpoints = ",".join(r.endpoint for r in receivers)
    big = np.ones(20_000, np.float64)  # two frames
    with Client(
        {"u": ((20_000,), "f8"), "v": ((), "f4")},
        simulation_id=4,
        endpoints=endpoints,
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        for step in range(7):
            c.send(step, u=big * step, v=np.float32(step))
    for rank, rec in enumerate(receivers):
        messages = rec.until_bye()
        assert isinstance(messages[0], p.Hello)
        assert messages[-1] == p.Bye(4, 0, 1, len(range(rank, 7, 2)))  # steps sent to it
        steps = [(m.time_step, m.name) for m in messages[1:-1]]  # type: ignore[union-attr]
        # small "v" is batched: it may come after later "u"s
        assert sorted(steps) == [(t, n) for t in range(rank, 7, 2) for n in ("u", "v")]


@pytest.mark.timeout(30)
def test_bye_counts_the_steps_sent_to_each_receiver(zctx: zmq.Context) -> None:
    """Every tenth step: all go to receiver 0 (t % 2 == 0), none to receiver 1; each
    receiver's BYE says how many it got (it finishes on that count)."""
    receivers = [Receiver(zctx), Receiver(zctx)]
    with Client(
        {"u": ((3,), "f4")},
        None,
        5,
        [r.endpoint for r in receivers],
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        for step in (0, 10, 20, 30, 7):
            c.send(step, u=np.full(3, step, np.float32))
        assert c.steps_sent == 5
    assert receivers[0].until_bye()[-1] == p.Bye(5, 0, 1, 4)
    assert receivers[1].until_bye()[-1] == p.Bye(5, 0, 1, 1)


# -- validation -----------------------------------------------------------------------

GOOD = {"u": ((2, 3), "float32")}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"fields": {}}, ValueError, "at least one field"),
        ({"fields": {"time_step": ((1,), "f4")}}, ValueError, "reserved"),
        ({"fields": {"": ((1,), "f4")}}, ValueError, "1 to 255"),
        ({"fields": {"é" * 128: ((1,), "f4")}}, ValueError, "1 to 255"),
        ({"fields": {"u": ((2,), "complex64")}}, ValueError, "cannot be streamed"),
        ({"fields": {"u": ((2,), ">f4")}}, ValueError, "cannot be streamed"),
        ({"fields": {"u": ((2,), "no_such_type")}}, ValueError, "is not a dtype"),
        ({"fields": {"u": ((2,), None)}}, ValueError, "is not a dtype"),
        ({"fields": {"u": ((0, 2), "f4")}}, ValueError, "positive"),
        ({"fields": {"u": ((1,) * 9, "f4")}}, ValueError, "at most 8"),
        ({"fields": {"u": ((2.5,), "f4")}}, ValueError, "tuple of ints"),
        ({"fields": {"u": "float32"}}, ValueError, "global shape, dtype"),
        ({"fields": ["u"]}, ValueError, "FieldSpecs"),
        ({"fields": {"u": ((1 << 20, 1 << 10), "f8")}}, ValueError, "max_message_bytes"),
        ({"parameters": {"a": float("nan")}}, ValueError, "not finite"),
        ({"parameters": {"a": "x"}}, ValueError, "not a number"),
        ({"parameters": {1: 2.0}}, ValueError, "must be strings"),
        ({"simulation_id": -1}, ValueError, "out of range"),
        ({"simulation_id": 2**64}, ValueError, "out of range"),
        ({"simulation_id": 1.0}, ValueError, "must be an integer"),
        ({"simulation_id": True}, ValueError, "must be an integer"),
        ({"endpoints": "127.0.0.1:5555"}, ValueError, "tcp://HOST:PORT"),
        ({"endpoints": []}, ValueError, "tcp://HOST:PORT"),
        ({"endpoints": "tcp://no host here"}, ValueError, "cannot connect"),
        ({"send_timeout": -1}, ValueError, "send_timeout"),
    ],
)
@pytest.mark.timeout(10)
def test_construction_errors(kwargs: dict[str, Any], error: type, match: str) -> None:
    args: dict[str, Any] = {"fields": GOOD, "simulation_id": 1, "endpoints": "tcp://127.0.0.1:1"}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        Client(**args)


def test_missing_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=f"{ENV_ENDPOINTS}.*{ENV_RENDEZVOUS}"):
        Client(GOOD, simulation_id=1)
    with pytest.raises(ValueError, match=ENV_SIMULATION_ID):
        Client(GOOD, endpoints="tcp://127.0.0.1:1")
    monkeypatch.setenv(ENV_SIMULATION_ID, "sim-3")
    with pytest.raises(ValueError, match=f"{ENV_SIMULATION_ID}='sim-3' is not an integer"):
        Client(GOOD, endpoints="tcp://127.0.0.1:1")
    monkeypatch.setenv(ENV_SIMULATION_ID, "3")
    for bad, match in (("{oops", "not valid JSON"), ("[1, 2]", "JSON object"), ('{"x": "a"}', "x")):
        monkeypatch.setenv(ENV_PARAMETERS, bad)
        with pytest.raises(ValueError, match=match):
            Client(GOOD, endpoints="tcp://127.0.0.1:1")


@pytest.mark.timeout(30)
def test_send_validation_sends_nothing(receiver: Receiver) -> None:
    fields = {"u": ((2, 3), "float32"), "big": ((100, 200), "float64")}
    u, big = np.zeros((2, 3), np.float32), np.zeros((100, 200))
    c = Client(
        fields, simulation_id=1, endpoints=receiver.endpoint, tuning=ClientTuning(close_timeout=10)
    )
    bad: list[tuple[tuple[Any, ...], dict[str, Any], type, str]] = [
        ((0,), {"u": u}, ValueError, r"missing \['big'\]"),
        ((0,), {"u": u, "big": big, "w": u}, ValueError, r"unknown \['w'\]"),
        ((0, {"u": u}), {"u": u, "big": big}, ValueError, "both in the mapping"),
        ((0,), {"u": u, "big": big.astype(np.float32)}, TypeError, "'big'.*float32.*float64"),
        ((0,), {"u": u.astype(np.float64), "big": big}, TypeError, "'u'.*float64.*float32"),
        ((0,), {"u": u.reshape(6), "big": big}, ValueError, r"'u'.*\(6,\).*\(2, 3\)"),
        ((0,), {"u": u, "big": big[:50]}, ValueError, "'big': shape"),
        ((-1,), {"u": u, "big": big}, ValueError, "out of range"),
        ((2**64,), {"u": u, "big": big}, ValueError, "out of range"),
        ((1.0,), {"u": u, "big": big}, ValueError, "must be an integer"),
        ((True,), {"u": u, "big": big}, ValueError, "must be an integer"),
    ]
    for args, kwargs, error, match in bad:
        with pytest.raises(error, match=match):
            c.send(*args, **kwargs)
    assert c.steps_sent == 0
    c.send(2, u=u + 1, big=big + 2)
    c.close()
    c.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        c.send(3, u=u, big=big)
    hello, first, second, bye = receiver.until_bye()
    assert isinstance(hello, p.Hello) and bye == p.Bye(1, 0, 1, 1)
    assert isinstance(first, p.Data) and (first.time_step, first.name) == (2, "u")
    assert isinstance(second, p.Data) and (second.time_step, second.name) == (2, "big")
    assert "closed" in repr(c)


@pytest.mark.timeout(30)
def test_batched_sends_validate_like_the_first(receiver: Receiver) -> None:
    """Sends in quick succession take `send`'s fast path: a bad one among them raises
    what it would raise alone, queues nothing, and the stream goes on."""
    fields = {"u": ((2, 3), "float32"), "w": ((4,), "int64")}
    u, w = np.zeros((2, 3), np.float32), np.zeros(4, np.int64)
    c = Client(
        fields, simulation_id=1, endpoints=receiver.endpoint, tuning=ClientTuning(batch_delay=60)
    )
    bad: list[tuple[tuple[Any, ...], dict[str, Any], type, str]] = [
        ((5,), {"u": u}, ValueError, r"missing \['w'\]"),
        ((5,), {"u": u, "w": w, "x": w}, ValueError, r"unknown \['x'\]"),
        ((5,), {"u": u, "v": w}, ValueError, r"missing \['w'\]; unknown \['v'\]"),
        ((5,), {"u": u.astype(np.float64), "w": w}, TypeError, "'u'.*float64.*float32"),
        ((5,), {"u": u, "w": w.astype(np.int32)}, TypeError, "'w'.*int32.*int64"),
        ((5,), {"u": u.reshape(6), "w": w}, ValueError, r"'u'.*\(6,\).*\(2, 3\)"),
        ((5,), {"u": u, "w": w[:3]}, ValueError, r"'w': shape \(3,\)"),
        ((-1,), {"u": u, "w": w}, ValueError, "out of range"),
        ((2**64,), {"u": u, "w": w}, ValueError, "out of range"),
    ]
    sent = []
    for t, (args, kwargs, error, match) in enumerate(bad):
        c.send(t * 2, u=u + t, w=w + t)  # the sends before and after are quick: batched
        sent.append(t * 2)
        with pytest.raises(error, match=match):
            c.send(*args, **kwargs)
    c.send(100, {"u": u[::-1, ::-1].copy()}, w=w[::-1])  # a view and a mapping: general way
    c.send(101, u=np.asfortranarray(u), w=w)
    sent += [100, 101]
    assert c.steps_sent == len(sent)
    c.close()
    messages = receiver.until_bye()
    data = [m for m in messages if isinstance(m, p.Data)]
    assert receiver.batches > 0 and messages[-1] == p.Bye(1, 0, 1, len(sent))
    assert sorted({m.time_step for m in data}) == sent
    assert len(data) == 2 * len(sent)  # each field of each good step, once
    for m in data:
        if m.time_step < 100:
            assert int(m.payload.reshape(-1)[0]) == m.time_step // 2, m


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reuse", ["immediate", "next_send", "never"])
def test_large_sends_take_a_short_path_that_sends_what_the_general_one_does(
    zctx: zmq.Context, reuse: str
) -> None:
    """A client whose fields all leave without a copy takes `send`'s short path: it sends
    the very frames the general path sends, a bad send among good ones raises what it
    would raise alone and queues nothing, and `array_reuse` is honoured ("never" makes
    the array read-only; every mode releases what it sent by `close`)."""
    fields = {"u": ((128, 129), "float32"), "w": ((70000,), "int8")}  # both > 64 KiB
    sent: list[list[list[bytes]]] = []
    for short in (True, False):
        receiver = Receiver(zctx)
        c = Client(fields, None, 3, receiver.endpoint, array_reuse=reuse)
        assert c._fast is not None
        if not short:
            c._fast = None  # the general path, for comparison
        arrays = []
        for t in (0, 1, 5, 6):
            u, w = np.full((128, 129), t, np.float32), np.full(70000, t, np.int8)
            c.send(t, u=u, w=w)
            arrays.append(u)
            with pytest.raises(TypeError, match="'u'.*float64.*float32"):
                c.send(t + 10, u=u.astype(np.float64), w=w)
            with pytest.raises(ValueError, match=r"missing \['w'\]"):
                c.send(t + 10, u=u)
        c.send(7, {"u": u.T.copy().T, "w": w})  # a mapping: the general path
        assert all(a.flags.writeable == (reuse != "never") for a in arrays)
        assert c.steps_sent == 5
        c.close()
        messages = receiver.until_bye()
        data = [m for m in messages if isinstance(m, p.Data)]
        assert [(m.time_step, m.name) for m in data] == [
            (t, name) for t in (0, 1, 5, 6, 7) for name in ("u", "w")
        ]
        assert all(np.all(m.payload == min(m.time_step, 6)) for m in data)
        assert receiver.frames[1:-1] == [2] * 10  # header + payload, one message each
        assert c._transport.held.nbytes == 0 and len(c._transport.held) == 0
        sent.append(receiver.raw)
    assert sent[0] == sent[1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fields", [GOOD, {"u": ((2, 3), "float32"), "w": ((4,), "int64")}])
def test_batched_sends_take_a_short_path_that_sends_what_the_general_one_does(
    zctx: zmq.Context, fields: dict[str, Any]
) -> None:
    """Quick small sends through the short path and through the general path put the
    same frames on the wire (the batches are only sent at `close`: batch_delay=60)."""
    sent: list[list[list[bytes]]] = []
    for short in (True, False):
        receiver = Receiver(zctx)
        c = Client(fields, None, 3, receiver.endpoint, tuning=ClientTuning(batch_delay=60))
        fast, taken = c._fast, []
        assert fast is not None
        c._fast = (lambda t, g, f=fast, k=taken: k.append(f(t, g)) or k[-1]) if short else None
        for t in (0, 1, 5, 2, 2, 9):
            c.send(t, **{n: np.full(shape, t, dtype) for n, (shape, dtype) in fields.items()})
        c.close()
        messages = receiver.until_bye()
        assert receiver.batches > 0 and messages[-1] == p.Bye(3, 0, 1, 5)
        assert taken == ([False] + [True] * 5 if short else [])  # the first is not quick
        sent.append(receiver.raw)
    assert sent[0] == sent[1]


@pytest.mark.timeout(30)
def test_batched_sends_of_one_field_validate_like_the_first(receiver: Receiver) -> None:
    """A single-field client's quick sends take their own short path: a bad one raises
    what it would raise alone and queues nothing; steps in any order count once."""
    u = np.zeros((2, 3), np.float32)
    c = Client(
        {"u": ((2, 3), "float32")}, None, 1, receiver.endpoint, tuning=ClientTuning(batch_delay=60)
    )
    bad: list[tuple[tuple[Any, ...], dict[str, Any], type, str]] = [
        ((5,), {"x": u}, ValueError, r"missing \['u'\]; unknown \['x'\]"),
        ((5,), {"u": u.astype(np.float64)}, TypeError, "'u'.*float64.*float32"),
        ((5,), {"u": u.reshape(6)}, ValueError, r"'u'.*\(6,\).*\(2, 3\)"),
        ((5,), {"u": [[0.0] * 3] * 2}, TypeError, "'u'.*float64.*float32"),  # a list
        ((-1,), {"u": u}, ValueError, "out of range"),
        ((2**64,), {"u": u}, ValueError, "out of range"),
        ((5.0,), {"u": u}, ValueError, "must be an integer"),
    ]
    sent = []
    for t, (args, kwargs, error, match) in enumerate(bad):
        c.send(t * 2, u=u + t)  # quick sends: the single-field path
        sent.append(t * 2)
        with pytest.raises(error, match=match):
            c.send(*args, **kwargs)
    c.send(20, u=u + 10)  # not the next step of the run 0, 2, 4, ...: counted all the same
    c.send(np.int64(21), u=u + 10)  # another integer type, a mapping, a view: general way
    c.send(22, {"u": u + 11})
    ramp = np.arange(6, dtype=np.float32).reshape(2, 3) + 22
    c.send(23, u=np.asfortranarray(ramp))  # sent in C order
    c.send(20, u=u + 10)  # a step sent again counts once
    sent += [20, 21, 22, 23]
    assert c.steps_sent == len(sent)
    c.close()
    messages = receiver.until_bye()
    data = [m for m in messages if isinstance(m, p.Data)]
    assert receiver.batches > 0 and messages[-1] == p.Bye(1, 0, 1, len(sent))
    assert sorted(m.time_step for m in data) == sorted([*sent, 20])
    for m in data:
        if m.time_step != 23:
            assert int(m.payload.reshape(-1)[0]) == m.time_step // 2, m
    (last,) = [m for m in data if m.time_step == 23]
    assert last.payload.tobytes() == ramp.tobytes()


@pytest.mark.timeout(30)
def test_exception_in_with_block_sends_no_bye(receiver: Receiver) -> None:
    with (
        pytest.raises(KeyError),
        Client(
            GOOD,
            simulation_id=8,
            endpoints=receiver.endpoint,
            tuning=ClientTuning(close_timeout=10),
        ) as c,
    ):
        c.send(0, u=np.ones((2, 3), np.float32))
        raise KeyError("the solver failed")
    assert [type(m) for m in (receiver.recv(), receiver.recv())] == [p.Hello, p.Data]
    receiver.assert_silent()


# -- back-pressure and timeouts -------------------------------------------------------


INLINE_SHAPE = (INLINE_MAX_BYTES // 8,)  # 64 KiB of float64: one frame
TWO_FRAME_SHAPE = (1, 1 << 17)  # 1 MiB: two frames


def stalled_pair(zctx: zmq.Context, shape: tuple[int, ...], **client_args: Any) -> tuple:
    """A receiver that does not read yet, and a client: tiny queues and socket buffers.

    (A large array's `send` returns once the array is in the receiver's queue: the
    receiver has room for 3 messages, so that a few large sends go through.)
    """
    receiver = Receiver(zctx, RCVHWM=1 if shape == INLINE_SHAPE else 4, RCVBUF=4096)
    client = Client(
        {"u": (shape, "f8")},
        simulation_id=6,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(sndhwm=2, socket_options={zmq.SNDBUF: 4096}, close_timeout=10),
        **client_args,
    )
    return receiver, client


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shape", [INLINE_SHAPE, TWO_FRAME_SHAPE], ids=["inline", "two_frames"])
def test_send_timeout_under_backpressure_loses_nothing(
    zctx: zmq.Context, shape: tuple[int, ...]
) -> None:
    # 2 s, not 0.3: a 1 MiB send that goes through crosses 4 KiB socket buffers (the
    # first one the connection too), which took over 0.3 s on a loaded machine
    receiver, c = stalled_pair(zctx, shape, send_timeout=2.0)
    sent = []
    with c:
        for step in range(1000):
            try:
                c.send(step, u=np.full(shape, step, float))
            except TimeoutError as exc:
                assert "back-pressure" in str(exc) and "send_timeout=2.0" in str(exc)
                timed_out = step
                break
            sent.append(step)
        else:
            pytest.fail("back-pressure never blocked the client")
        assert c.steps_sent == len(sent) >= 1
        # the receiver starts reading: what was sent arrives, then close() can send BYE
        messages = [receiver.recv() for _ in range(1 + len(sent))]
    messages += receiver.until_bye()
    assert isinstance(messages[0], p.Hello)
    data = [m for m in messages if isinstance(m, p.Data)]
    assert all(np.all(m.payload == m.time_step) for m in data)
    steps = [m.time_step for m in data]
    if shape == INLINE_SHAPE:  # a one-frame message that timed out was not queued
        assert steps == sent
    else:  # a large array that timed out waiting to be released is still delivered
        assert steps in (sent, [*sent, timed_out])
    assert messages[-1] == p.Bye(6, 0, 1, len(sent))


@pytest.mark.timeout(30)
def test_backpressure_blocks_until_the_receiver_reads(zctx: zmq.Context) -> None:
    receiver, c = stalled_pair(zctx, INLINE_SHAPE)  # no send_timeout: blocks as needed
    got: list[p.Message] = []
    reading = threading.Event()  # set as the receiver begins to read

    def read_later() -> None:
        time.sleep(0.5)  # the client fills every queue meanwhile
        reading.set()
        got.extend(receiver.until_bye(timeout=10))

    reader = threading.Thread(target=read_later)
    reader.start()
    with c:
        for step in range(60):
            c.send(step, u=np.full(INLINE_SHAPE, step, float))
        # 60 x 64 KiB cannot all be queued (a few messages' room): the last sends waited
        # for the reader. (An event, not a time: "blocked >= 0.4 s", timed from after the
        # reader's 0.5 s had begun, held only while the machine was quick.)
        sent_before_reading = not reading.is_set()
    reader.join(timeout=20)
    assert not sent_before_reading
    data = [m for m in got if isinstance(m, p.Data)]
    assert [m.time_step for m in data] == list(range(60))
    assert all(np.all(m.payload == m.time_step) for m in data)
    assert got[-1] == p.Bye(6, 0, 1, 60)


@pytest.mark.timeout(30)
def test_close_reports_undelivered_messages() -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"  # nobody listens there
    c = Client(GOOD, simulation_id=1, endpoints=endpoint, tuning=ClientTuning(close_timeout=0.3))
    c.send(0, u=np.ones((2, 3), np.float32))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="not delivered within close_timeout=0.3"):
        c.close()
    assert time.monotonic() - started < 3


# -- no torch, MPI --------------------------------------------------------------------

CLIENT_SIDE_ONLY = """
import sys
import melissa_trainer.client
shared = {"melissa_trainer.stream", "melissa_trainer.wire",
          "melissa_trainer.stream.endpoints", "melissa_trainer.stream.step_set",
          "melissa_trainer.common", "melissa_trainer.common.checks",
          "melissa_trainer._moved"}  # (the old import paths: standard library only)
loaded = sorted(
    m for m in sys.modules
    if m in ("torch", "accelerate") or m.startswith("melissa_trainer.") and m not in shared
    and not m.startswith("melissa_trainer.client")
)
print(loaded)
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_client_package_loads_no_receiving_side() -> None:
    """`import melissa_trainer.client` loads the client package and the modules both
    sides share (the wire format, the rendezvous, the checks of counts and durations),
    nothing of the receiving side (receiver, ingest, buffers) nor torch."""
    result = subprocess.run(
        [sys.executable, "-c", CLIENT_SIDE_ONLY], capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


NO_TORCH = """
import sys
import numpy as np
import melissa_trainer.client as mc
loaded = [m for m in ("torch", "accelerate", "mpi4py") if m in sys.modules]
assert not loaded, loaded
with mc.Client({"u": ((3,), "float32")}, simulation_id=11, endpoints=sys.argv[1],
               tuning=mc.ClientTuning(close_timeout=20)) as client:
    client.send(0, u=np.arange(3, dtype=np.float32))
loaded = [m for m in ("torch", "accelerate", "mpi4py") if m in sys.modules]
assert not loaded, loaded
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_client_imports_no_torch(receiver: Receiver) -> None:
    """A simulation imports the client without torch or accelerate (a fresh process)."""
    result = subprocess.run(
        [sys.executable, "-c", NO_TORCH, receiver.endpoint],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    hello, data, bye = receiver.until_bye()
    assert isinstance(hello, p.Hello) and hello.simulation_id == 11
    assert isinstance(data, p.Data) and data.payload.tolist() == [0.0, 1.0, 2.0]
    assert bye == p.Bye(11, 0, 1, 1)


# What the client must not add to a process that has imported numpy and pyzmq: the
# trainer's side (torch, accelerate), MPI unless a communicator is given, and what it
# only needs on rare paths, imported there (logging: the client's warnings; socket: a
# receiver's advertised host name): each is milliseconds of every simulation's start-up
# (benchmarks/client_startup.py). Compared with a process that imported numpy and zmq
# alone, so that what they import themselves (in any version) does not count.
NOT_AT_START = ("torch", "accelerate", "mpi4py", "logging", "socket", "selectors", "asyncio")
# ... and the package's own modules of rare paths: predictions, the follow socket's queries
RARE_PATHS = (
    "melissa_trainer.client.predict",
    "melissa_trainer.wire.predict",
    "melissa_trainer.wire.held",
    "melissa_trainer.wire.admission",
    "melissa_trainer.wire.receipt",
    "melissa_trainer.client.confirm",
    "melissa_trainer.client.receipts",
)

CLIENT_ADDS = """
import json, sys
import numpy, zmq
before = set(sys.modules)
from melissa_trainer.client import Client
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_client_import_adds_no_heavy_module_to_numpy_and_zmq() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CLIENT_ADDS], capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0, result.stderr
    added = set(json.loads(result.stdout))
    assert "melissa_trainer.client.client" in added  # (the oracle sees the import)
    assert not {m.split(".")[0] for m in added} & set(NOT_AT_START), sorted(added)
    assert not added & set(RARE_PATHS), sorted(added)


@pytest.mark.timeout(30)
def test_close_after_an_error_still_logs_with_logging_imported_late(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client gets its logger when it logs (logging is not imported with it)."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"  # nobody listens there
    c = Client(GOOD, simulation_id=3, endpoints=endpoint, tuning=ClientTuning(close_timeout=0.2))
    c.send(0, u=np.ones((2, 3), np.float32))
    with caplog.at_level("WARNING", logger="melissa_trainer.client.client"):
        c.close(bye=False)
    # (which bound ended it depends on whether ZeroMQ saw the refused connect within
    # the 0.2 s: either the close_timeout or "unreachable"; the oracle is that it logged)
    assert "simulation 3 rank 0: queued messages not delivered" in caplog.text, caplog.text
    assert "close_timeout=0.2" in caplog.text or "unreachable" in caplog.text, caplog.text


def test_advertised_names_this_host_for_a_wildcard_address() -> None:
    """`advertised` imports `socket` when it needs the host name (see NOT_AT_START)."""
    from melissa_trainer.stream.endpoints import advertised

    host = socket.gethostname()
    assert advertised("tcp://0.0.0.0:5555", None) == f"tcp://{host}:5555"
    assert advertised("tcp://*:5555", "") == f"tcp://{host}:5555"
    assert advertised("tcp://[::]:5555", None) == f"tcp://{host}:5555"
    assert advertised("tcp://10.0.0.7:5555", None) == "tcp://10.0.0.7:5555"
    assert advertised("tcp://10.0.0.7:5555", "node3") == "tcp://node3:5555"
    assert advertised("ipc:///tmp/x", "node3") == "ipc:///tmp/x"


def _mpi_script() -> Any:
    spec = importlib.util.spec_from_file_location("mpi_client", SCRIPTS / "mpi_client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mpiexec() -> str:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    return mpiexec


def _run_mpi(receiver: Receiver, *args: str) -> tuple[list[p.Message], str]:
    proc = subprocess.Popen(
        [_mpiexec(), "-n", "2", sys.executable, str(SCRIPTS / "mpi_client.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # each wait bounds one message (the first: mpiexec's start and two ranks'
        # imports): generous, for a loaded 2-core machine
        messages = receiver.until_bye(byes=2, timeout=90)
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, output
    return messages, output


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_mpi_ranks_send_parts_reassembled_bit_for_bit(receiver: Receiver) -> None:
    script = _mpi_script()
    messages, output = _run_mpi(receiver, receiver.endpoint)
    hellos = [m for m in messages if isinstance(m, p.Hello)]
    assert sorted(h.client_rank for h in hellos) == [0, 1]
    for h in hellos:
        assert (h.simulation_id, h.client_count, h.parameters) == (42, 2, script.PARAMETERS)
    byes = sorted((m for m in messages if isinstance(m, p.Bye)), key=lambda b: b.client_rank)
    assert byes == [p.Bye(42, r, 2, script.STEPS) for r in (0, 1)]
    # reassemble each (step, field) by offset and count, as a receiver does
    full: dict[tuple[int, str], np.ndarray] = {}  # the fields' bytes
    covered: dict[tuple[int, str], np.ndarray] = {}  # how often each element came
    for m in messages:
        if not isinstance(m, p.Data):
            continue
        key, item = (m.time_step, m.name), m.dtype.itemsize
        size = int(np.prod(m.shape))
        raw = full.setdefault(key, np.zeros(size * item, np.uint8))
        hits = covered.setdefault(key, np.zeros(size, np.int8))
        raw[m.offset * item : (m.offset + m.elements) * item] = m.payload.view(np.uint8)
        hits[m.offset : m.offset + m.elements] += 1
        assert m.offset == sum(script.SPLITS[m.name][: m.client_rank])
        assert m.dtype == np.dtype(script.FIELDS[m.name][1])
    assert sorted(full) == [(t, n) for t in range(script.STEPS) for n in ("mask", "u")]
    for (step, name), raw in full.items():
        assert np.all(covered[step, name] == 1)  # no gap, no overlap
        expected = script.global_fields(step)[name]
        assert raw.tobytes() == expected.tobytes(), (step, name)  # bit for bit


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_mpi_bad_first_send_raises_on_every_rank(receiver: Receiver) -> None:
    messages, output = _run_mpi(receiver, receiver.endpoint, "mistakes")
    assert "rank 1 raised TypeError: field 'u': dtype float32" in output
    assert "rank 0 raised ValueError: the first send failed its checks on 1 other" in output
    assert output.count("do not add up to the global fields") == 2, output
    data = [m for m in messages if isinstance(m, p.Data)]
    assert sorted((m.client_rank, m.name) for m in data) == [
        (0, "mask"),
        (0, "u"),
        (1, "mask"),
        (1, "u"),
    ]
    assert {m.time_step for m in data} == {0}


class FakeComm:
    """Rank 1 of 2 of an mpi4py communicator; rank 0 has the first 2 elements of a field."""

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's names
        return 1

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def Exscan(self, local: np.ndarray, out: np.ndarray, op: Any = None) -> None:  # noqa: N802
        out[:-1], out[-1] = 2, 0

    def Allreduce(self, local: np.ndarray, out: np.ndarray, op: Any = None) -> None:  # noqa: N802
        out[:-1], out[-1] = local[:-1] + 2, local[-1]


@pytest.mark.timeout(30)
def test_client_output_is_the_specification_example(receiver: Receiver) -> None:
    """The worked examples of docs/protocol.md are what the client sends, byte for byte."""
    pytest.importorskip("mpi4py")
    with Client(
        {"u": ((2, 2), "float32")},
        {"t0": 300.0},
        simulation_id=7,
        endpoints=receiver.endpoint,
        comm=FakeComm(),
        tuning=ClientTuning(close_timeout=10, batch_bytes=0),  # the examples are DATA
    ) as c:
        for step in range(10):
            c.send(step, u=np.array([-0.5, 0.25], np.float32) + np.float32(step != 3))
    messages = receiver.until_bye()
    assert len(messages) == 12 and receiver.frames == [1] * 12
    assert receiver.raw[0] == [spec_dump("hello")]
    assert receiver.raw[1 + 3] == [spec_dump("data")]
    assert receiver.raw[-1] == [spec_dump("bye")]


# -- internals ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60) | st.sampled_from([0, 3, 6, 9, 12]), max_size=200))
def test_step_set_counts_distinct_steps(steps: list[int]) -> None:
    counter = StepSet()
    seen: set[int] = set()
    for step in steps:
        counter.add(step)
        seen.add(step)
        assert counter.count == len(seen)
    assert all((t in counter) == (t in seen) for t in range(-1, 70))


def test_step_set_is_small_for_regular_steps() -> None:
    counter = StepSet()
    for step in range(0, 1_000_000, 10):
        counter.add(step)
    assert counter.count == 100_000 and counter.runs == [[0, 999_990, 10]]


# -- batching of small payloads ---------------------------------------------------------------


@pytest.mark.timeout(30)
def test_fast_small_sends_are_batched_and_arrive_once(receiver: Receiver) -> None:
    n = 2000
    with Client(
        {"u": ((64,), "f4"), "w": ((3,), "i8")},
        simulation_id=9,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10, batch_bytes=4096),
    ) as c:
        for t in range(n):
            c.send(t, u=np.full(64, t, np.float32), w=np.array([t, -t, 7], np.int64))
    messages = receiver.until_bye()
    data = [m for m in messages if isinstance(m, p.Data)]
    assert sorted((m.time_step, m.name) for m in data) == [
        (t, name) for t in range(n) for name in ("u", "w")
    ]
    for m in data:
        want = [m.time_step] * 64 if m.name == "u" else [m.time_step, -m.time_step, 7]
        assert m.payload.tolist() == want
    assert messages[-1] == p.Bye(9, 0, 1, n)
    assert receiver.batches >= n * (64 * 4 + 8) // 4096  # what fills batches of 4 KB
    assert len(receiver.frames) < n // 10  # far fewer messages than payloads


@pytest.mark.timeout(30)
def test_a_batch_left_by_a_pause_is_sent_by_the_flusher(receiver: Receiver) -> None:
    with Client(
        GOOD,
        simulation_id=2,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10, batch_delay=0.05),
    ) as c:
        for t in range(3):  # the first goes at once, the next two wait in a batch
            c.send(t, u=np.full((2, 3), t, np.float32))
        got = [receiver.recv(timeout=10) for _ in range(4)]  # no send, no close: the flusher
        assert [type(m) for m in got] == [p.Hello, p.Data, p.Data, p.Data]
        assert [m.time_step for m in got[1:]] == [0, 1, 2]  # type: ignore[union-attr]
        assert receiver.batches == 1
    assert receiver.recv() == p.Bye(2, 0, 1, 3)


@pytest.mark.timeout(30)
def test_sends_further_apart_than_the_delay_are_not_batched(receiver: Receiver) -> None:
    with Client(
        GOOD,
        simulation_id=2,
        endpoints=receiver.endpoint,
        tuning=ClientTuning(close_timeout=10, batch_delay=0.01),
    ) as c:
        for t in range(4):
            c.send(t, u=np.zeros((2, 3), np.float32))
            time.sleep(0.03)
    assert len(receiver.until_bye()) == 6 and receiver.batches == 0


class _Clock:
    """`time` for the client's modules, whose `monotonic` the test moves forward: a
    pause of the simulation without a sleep (the flusher, on the real clock, sleeps
    `batch_delay / 2` of real time between its rounds)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


@pytest.mark.timeout(30)
@pytest.mark.parametrize("send_timeout", [None, 10.0])  # the fast path, the general one
def test_a_send_after_a_pause_leaves_after_the_batched_steps_before_it(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, send_timeout: float | None
) -> None:
    """A send after a pause longer than `batch_delay` goes at once, as plain DATA; the
    records of earlier steps still in a batch (the flusher had not sent them: a busy
    machine) leave before it, so that the receiver gets one client's steps in the order
    sent (the batch used to leave after it: a FIFO buffer got steps 0, 20, 10, 30)."""
    from melissa_trainer.client import fast_send, transport

    clock = _Clock()
    monkeypatch.setattr(transport, "time", clock)
    monkeypatch.setattr(fast_send, "time", clock)  # (read when the client is made)
    with Client(
        GOOD,
        simulation_id=4,
        endpoints=receiver.endpoint,
        send_timeout=send_timeout,
        tuning=ClientTuning(close_timeout=10, batch_delay=3600),  # the flusher sleeps
    ) as c:
        c.send(0, u=np.full((2, 3), 0, np.float32))  # the first: at once
        c.send(1, u=np.full((2, 3), 1, np.float32))  # soon after: into a batch
        clock.offset += 7200  # a pause: the next send is "rare"
        c.send(2, u=np.full((2, 3), 2, np.float32))
    got = receiver.until_bye()
    assert [type(m) for m in got] == [p.Hello, p.Data, p.Data, p.Data, p.Bye]
    assert [m.time_step for m in got[1:4]] == [0, 1, 2]  # type: ignore[union-attr]
    assert [m.payload.tolist() for m in got[1:4]] == [  # type: ignore[union-attr]
        [t] * 6 for t in range(3)
    ]
    assert receiver.batches == 1 and got[-1] == p.Bye(4, 0, 1, 3)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"batch_bytes": -1}, r"ClientTuning\.batch_bytes must be a non-negative int"),
        ({"batch_bytes": 1.5}, r"ClientTuning\.batch_bytes must be a non-negative int"),
        ({"batch_bytes": 10, "max_message_bytes": 8}, r"batch_bytes=10 is more than .*lower"),
        ({"batch_delay": 0}, r"ClientTuning\.batch_delay must be > 0 .*batch_bytes=0 disables"),
        ({"batch_delay": "1"}, r"ClientTuning\.batch_delay must be > 0"),
        ({"sndhwm": True}, r"ClientTuning\.sndhwm must be a non-negative int"),
        ({"max_message_bytes": -1}, r"ClientTuning\.max_message_bytes must be"),
        ({"socket_options": [1]}, r"ClientTuning\.socket_options must be a mapping"),
        ({"close_timeout": -1}, r"ClientTuning\.close_timeout must be None .*or a number"),
        ({"close_timeout": float("nan")}, r"ClientTuning\.close_timeout must be"),
        ({"sndhwm": -1}, r"ClientTuning\.sndhwm must be a non-negative int"),
        ({"rendezvous_timeout": None}, r"ClientTuning\.rendezvous_timeout must be a number"),
    ],
)
def test_tuning_is_checked_when_created(options: dict[str, Any], match: str) -> None:
    """Every tuning mistake fails at `ClientTuning(...)`, naming the field and the fix."""
    with pytest.raises(ValueError, match=match):
        ClientTuning(**options)


def test_client_checks_its_own_arguments() -> None:
    """What a user sets is checked by `Client`, naming the argument."""
    endpoint = "tcp://127.0.0.1:1"
    with pytest.raises(ValueError, match="send_timeout must be None .*or a number of seconds"):
        Client(GOOD, simulation_id=1, endpoints=endpoint, send_timeout=-1)
    with pytest.raises(ValueError, match="tuning must be a ClientTuning"):
        Client(GOOD, simulation_id=1, endpoints=endpoint, tuning={"sndhwm": 2})  # type: ignore[arg-type]
    small = ClientTuning(max_message_bytes=16, batch_bytes=0)
    with pytest.raises(ValueError, match=r"'u' is 24 bytes, more than max_message_bytes=16"):
        Client(GOOD, simulation_id=1, endpoints=endpoint, tuning=small)
    with pytest.raises(TypeError, match="sndhwm"):  # tuning is no longer a keyword of Client
        Client(GOOD, simulation_id=1, endpoints=endpoint, sndhwm=2)  # type: ignore[call-arg]


class _ManyRanks:
    """A communicator of 2**16 ranks: one more than a u16 client count can say."""

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return 0

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return 1 << 16


def test_rank_count_must_fit_the_wire() -> None:
    """2**16 ranks used to pass the check and fail in struct.pack; now a ValueError."""
    with pytest.raises(ValueError, match="65536 ranks: the protocol allows at most 65535"):
        Client(GOOD, simulation_id=1, endpoints="tcp://127.0.0.1:1", comm=_ManyRanks())


@pytest.mark.timeout(30)
def test_close_with_the_callers_context_says_when_nothing_was_delivered() -> None:
    """With a context of the caller's, closing a socket does not wait for ZeroMQ to
    deliver (the socket lingers in the background and drops what is left, silently):
    `close` must still find out, or a worker sharing one context reports a simulation
    finished whose data never left (found by tests/launcher/test_scale.py: "exit 0, no HELLO")."""
    context = zmq.Context()
    try:
        client = Client(
            {"u": ((4,), "float32")},
            simulation_id=1,
            endpoints=f"tcp://127.0.0.1:{free_port()}",  # nobody listens there
            tuning=ClientTuning(close_timeout=0.5),
            context=context,
        )
        client.send(0, u=np.zeros(4, np.float32))
        began = time.monotonic()
        with pytest.raises(TimeoutError, match="not delivered within close_timeout=0.5"):
            client.close()
        assert time.monotonic() - began < 5
    finally:
        context.term()


@pytest.mark.timeout(30)
def test_a_worker_sharing_one_context_delivers_every_simulation() -> None:
    """One context for many clients (worker mode): each close returns once its BYE has
    left, and the receiving end gets every simulation whole."""
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        for sid in range(20):
            with Client(
                {"u": ((4,), "float32")},
                simulation_id=sid,
                endpoints=f"tcp://127.0.0.1:{port}",
                context=context,
            ) as client:
                for t in range(3):
                    client.send(t, u=np.full(4, t, np.float32))
        kinds = []
        while pull.poll(1000):
            frames = pull.recv_multipart()
            kinds.append(type(p.decode(frames[0], frames[1] if len(frames) > 1 else None)))
        assert kinds.count(p.Hello) == 20 and kinds.count(p.Bye) == 20
    finally:
        pull.close(linger=0)
        context.term()


@pytest.mark.timeout(30)
def test_predict_asks_as_the_run_the_client_followed(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A solver that followed a restarted trainer (external mode) sends as the new run but
    # asked for predictions as the old one, every request refused until its end ("the
    # trainer serving there belongs to another run"): the predictor follows the run too
    from melissa_trainer.client import PredictionUnavailable

    monkeypatch.setenv("MELISSA_TRAINER_SERVE_ENDPOINTS", "tcp://127.0.0.1:1")  # nothing there
    with Client(
        {"u": ((2,), "float32")},
        simulation_id=3,
        endpoints=receiver.endpoint,
        run_id="run-a",
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        with pytest.raises(PredictionUnavailable):
            c.predict({"u": np.zeros(2, np.float32)}, timeout=0.05)
        predictor = c._asking.predictor
        assert predictor is not None and predictor.run_id == "run-a"
        c.run_id = "run-b"  # what `Client._follow` does when it switches to the new run
        with pytest.raises(PredictionUnavailable):
            c.predict({"u": np.zeros(2, np.float32)}, timeout=0.05)
        assert c._asking.predictor is predictor and predictor.run_id == "run-b"
        c.send(0, u=np.zeros(2, np.float32))
    receiver.until_bye()
