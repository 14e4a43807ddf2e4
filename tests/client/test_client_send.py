"""The client sends fields intact (every dtype and shape, mappings, numpy integers,
non-contiguous arrays), HELLO and BYE, and when an array handed to `send` may be reused
(copied, overlapped, handed over); an error in its `with` block sends no BYE; its output is
the specification's worked example, byte for byte.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from client_runs import GOOD, TWO_FRAME_SHAPE, Receiver, free_port

from melissa_trainer import wire as p
from melissa_trainer.client import INLINE_MAX_BYTES, Client, ClientTuning
from melissa_trainer.client import held as held_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stream"))
from protocol_messages import spec_dump  # noqa: E402  (tests/stream/: the spec's hex dumps)

pytestmark = pytest.mark.usefixtures("_clean_environment")


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
    messages = receiver.until_bye()
    data = messages[1:-1]
    # every step arrived, once and in order (an empty or short stream would pass the
    # per-message check below vacuously), each with the values it had when sent
    assert [m.time_step for m in data if isinstance(m, p.Data)] == list(range(8))
    assert messages[-1] == p.Bye(1, 0, 1, 8)
    for msg in data:
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


@pytest.mark.timeout(30)
def test_exception_in_with_block_sends_no_bye(receiver: Receiver) -> None:
    with (
        pytest.raises(KeyError, match="the solver failed"),
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


class FakeComm:
    """Rank 1 of 2 of an mpi4py communicator; rank 0 declares the same fields (the count
    and hash pieces that `place_parts`'s first reduction sums, each with its square, are
    this rank's; it did not fail) and has the first 2 elements of each field (the
    reductions of the sizes that follow)."""

    def __init__(self) -> None:
        self.agreed = False

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's names
        return 1

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def Exscan(self, local: np.ndarray, out: np.ndarray, op: Any = None) -> None:  # noqa: N802
        out[:] = 2

    def Allreduce(self, local: np.ndarray, out: np.ndarray, op: Any = None) -> None:  # noqa: N802
        if not self.agreed:  # the first: the declarations compared
            self.agreed = True
            out[:-1], out[-1] = 2 * local[:-1], local[-1]
        else:
            out[:] = local + 2


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
