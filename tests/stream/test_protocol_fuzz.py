"""Fuzzing the wire protocol's decoder (hypothesis): arbitrary bytes, mutated valid messages
and arbitrary HELLO JSON are decoded or rejected with a `ProtocolError`, nothing else, and
what decodes is valid.
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_messages import data_message, hello_message

from melissa_trainer import wire as p
from melissa_trainer.wire.messages import StudyEnd


def _check_valid(msg: p.Message) -> None:
    """What a message `decode` returns guarantees."""
    if isinstance(msg, p.Data):
        assert 0 <= msg.client_rank < msg.client_count
        assert msg.dtype in p.DTYPE_CODES and len(msg.shape) <= p.MAX_NDIM
        size = int(np.prod(msg.shape, dtype=object)) if msg.shape else 1
        assert msg.elements >= 1 and msg.offset + msg.elements <= size
        assert memoryview(msg.payload).nbytes == msg.elements * msg.dtype.itemsize
        assert isinstance(msg.name, str)
    elif isinstance(msg, p.Hello):
        assert 0 <= msg.client_rank < msg.client_count and msg.fields
        for f in msg.fields:
            assert f.dtype in p.DTYPE_CODES and all(d >= 1 for d in f.shape)
        assert all(isinstance(v, float) for v in msg.parameters.values())
    elif isinstance(msg, p.Abandon):  # (a prefix of the right size is one: any id)
        assert 0 <= msg.simulation_id < 1 << 64 and isinstance(msg.replaced, bool)
    elif isinstance(msg, StudyEnd):
        ids = [int(i) for i in msg.finished]
        assert ids == sorted(set(ids)) and all(0 <= i < 1 << 64 for i in ids)
    else:
        assert isinstance(msg, p.Bye) and 0 <= msg.client_rank < msg.client_count


def _decode_or_reject(frame: bytes, payload: bytes | None) -> None:
    try:
        msg = p.decode(frame, payload, max_message_bytes=1 << 24)
    except p.ProtocolError as exc:
        assert exc.reason
        return
    _check_valid(msg)


_VALID = [
    data_message()[0],
    data_message(inline=False, shape=(3, 2), code=7)[0],
    data_message(shape=(), code=12, payload=b"\1")[0],
    hello_message(),
    p.encode_bye(3, 1, 2, 4),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.binary(max_size=200), payload=st.none() | st.binary(max_size=64))
def test_fuzz_arbitrary_bytes(frame: bytes, payload: bytes | None) -> None:
    _decode_or_reject(frame, payload)
    _decode_or_reject(p.MAGIC + bytes([p.VERSION]) + frame, payload)  # past the magic


@settings(max_examples=400, deadline=None)
@given(
    base=st.sampled_from(_VALID),
    edits=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 300),
    payload=st.none() | st.binary(max_size=64),
)
def test_fuzz_mutated_messages(
    base: bytes, edits: list[tuple[int, int]], cut: int, payload: bytes | None
) -> None:
    frame = bytearray(base[:cut] if cut < len(base) else base)
    for pos, value in edits:
        if frame:
            frame[pos % len(frame)] = value
    _decode_or_reject(bytes(frame), payload)


@settings(max_examples=200, deadline=None)
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(
                st.sampled_from(["fields", "name", "dtype", "shape", "parameters", "x"]),
                children,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_fuzz_hello_json(body: object) -> None:
    _decode_or_reject(hello_message(json.dumps(body).encode()), None)
