"""The wire protocol: round trips, every rejection reason, fuzzing, and the spec's numbers."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from melissa_trainer import wire as p
from melissa_trainer.wire.messages import StudyEnd

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "protocol.md"


def data_message(
    *,
    sim: int = 7,
    step: int = 3,
    rank: int = 0,
    ranks: int = 1,
    name: bytes = b"u",
    code: int = 1,
    shape: tuple[int, ...] = (2, 3),
    offset: int = 0,
    count: int | None = None,
    inline: bool = True,
    payload: bytes | None = None,
) -> tuple[bytes, bytes | None]:
    """A DATA message as (first frame, second frame or None); valid unless told otherwise."""
    if count is None:
        count = int(np.prod(shape)) - offset
    if payload is None:
        payload = bytes(range(256)) * (count * p.DTYPES[code].itemsize // 256 + 1)
        payload = payload[: count * p.DTYPES[code].itemsize]
    header = p.encode_data_header(sim, step, rank, ranks, name, code, shape, offset, count, inline)
    return (header + payload, None) if inline else (header, payload)


def hello_message(body: object = None, *, rank: int = 0, ranks: int = 1) -> bytes:
    """A HELLO with the given JSON body (a valid one by default), or raw body bytes."""
    if body is None:
        body = {"fields": [{"name": "u", "dtype": "<f4", "shape": [2, 3]}], "parameters": {}}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (
        p.PREFIX.pack(p.MAGIC, p.VERSION, p.HELLO, 0, 7)
        + p.HELLO_FIXED.pack(rank, ranks, len(raw))
        + raw
    )


def reason_of(frame: bytes, payload: bytes | None = None, **kwargs: int) -> str:
    with pytest.raises(p.ProtocolError) as info:
        p.decode(frame, payload, **kwargs)
    return info.value.reason


# -- round trips ----------------------------------------------------------------------


def test_hello_round_trip() -> None:
    fields = [p.FieldSpec(f"f{code}", dt, (code, 2)) for code, dt in p.DTYPES.items()]
    fields.append(p.FieldSpec("scalar", np.dtype("<f8"), ()))
    fields.append(p.FieldSpec("température", np.dtype("<f4"), (1,) * p.MAX_NDIM))
    params = {"b": 2.5, "a": -1.0, "z": 0.0}
    msg = p.decode(p.encode_hello(2**64 - 1, 3, 4, fields, params))
    assert msg == p.Hello(2**64 - 1, 3, 4, tuple(fields), params)
    assert list(msg.parameters) == ["b", "a", "z"]  # order kept: the sample's order
    assert msg.fields[-2].size == 1


def test_hello_names_its_client_optionally_and_is_never_refused_for_it() -> None:
    """HELLO's "client" key (docs/protocol.md section 6) says which client library sent
    it: what the launcher's start-up advice depends on (worker mode is the Python
    client's). Informational: absent, or a value the receiver does not know, reads as
    None and never refuses the HELLO."""
    u = [p.FieldSpec("u", np.dtype("<f4"), (2,))]
    plain = p.encode_hello(1, 0, 1, u)
    assert b"client" not in plain and p.decode(plain).client is None  # type: ignore[union-attr]
    for kind in p.CLIENT_KINDS:
        tagged = p.encode_hello(1, 0, 1, u, run_id="r1", client=kind)
        assert tagged.endswith(f', "run_id": "r1", "client": "{kind}"}}'.encode())
        assert p.decode(tagged).client == kind  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="client must be one of"):
        p.encode_hello(1, 0, 1, u, client="rust")
    body = json.loads(plain[p.PREFIX.size + p.HELLO_FIXED.size :])
    for odd in ("rust", "", 3, ["c"], {"c": 1}, None, "C"):
        frame = p.encode_hello(1, 0, 1, u)[: p.PREFIX.size]
        text = json.dumps({**body, "client": odd}).encode()
        frame += p.HELLO_FIXED.pack(0, 1, len(text)) + text
        msg = p.decode(frame)
        assert isinstance(msg, p.Hello) and msg.client is None and msg.fields == tuple(u)


@pytest.mark.parametrize("code", sorted(p.DTYPES))
@pytest.mark.parametrize("inline", [True, False])
def test_data_round_trip_every_dtype(code: int, inline: bool) -> None:
    dtype = p.DTYPES[code]
    values = np.arange(24).astype(dtype).reshape(2, 3, 4)
    part = values.reshape(-1)[5:17]
    header = p.encode_data_header(
        2**63, 2**40, 65534, 65535, "Ω".encode(), code, values.shape, 5, 12, inline
    )
    frame, payload = (header + part.tobytes(), None) if inline else (header, part.tobytes())
    msg = p.decode(frame, payload)
    assert isinstance(msg, p.Data)
    assert (msg.simulation_id, msg.time_step, msg.client_rank, msg.client_count) == (
        2**63,
        2**40,
        65534,
        65535,
    )
    assert (msg.name, msg.dtype, msg.shape, msg.offset, msg.elements) == (
        "Ω",
        dtype,
        (2, 3, 4),
        5,
        12,
    )
    assert np.array_equal(np.frombuffer(msg.payload, dtype), part)


def test_data_zero_dimensional_and_views() -> None:
    frame, _ = data_message(shape=(), code=2, payload=struct.pack("<d", 1.5))
    msg = p.decode(memoryview(frame))  # buffers are accepted, not only bytes
    assert isinstance(msg, p.Data)
    assert msg.shape == () and msg.elements == 1
    assert np.frombuffer(msg.payload, "<f8")[0] == 1.5
    big = bytearray(frame)
    msg = p.decode(big)
    assert isinstance(msg, p.Data) and bytes(msg.payload) == struct.pack("<d", 1.5)


def test_bye_round_trip() -> None:
    assert p.decode(p.encode_bye(9, 1, 2, 2**64 - 1)) == p.Bye(9, 1, 2, 2**64 - 1)


def test_layout_sizes() -> None:
    """The numbers docs/protocol.md gives."""
    assert p.PREFIX.size == 16
    assert p.DATA_FIXED.size == 32 and p.DATA_HEADER_BYTES == 48
    assert p.HELLO_FIXED.size == 8
    assert p.BYE_FIXED.size == 12 and len(p.encode_bye(0, 0, 1, 0)) == 28
    header = p.encode_data_header(1, 2, 3, 4, b"abc", 6, (5, 6, 7), 8, 9, False)
    assert len(header) == 48 + 3 * 8 + 3
    assert header[:4] == b"MTRN" and header[4] == 2 and header[5] == p.DATA
    assert struct.unpack_from("<H", header, 6)[0] == 0  # flags: not inline
    assert struct.unpack_from("<QQHHBBBBQQ", header, 8) == (1, 2, 3, 4, 6, 3, 3, 0, 8, 9)
    assert struct.unpack_from("<3Q", header, 48) == (5, 6, 7)
    assert header[72:] == b"abc"


def test_dtype_code() -> None:
    assert p.dtype_code(np.float32) == 1
    assert p.dtype_code("float64") == 2
    assert p.dtype_code("<i4") == 6
    assert p.dtype_code(bool) == 12
    assert p.dtype_code(np.dtype("u1")) == 8
    for bad in (">f4", "complex64", object, "U3", "f4,f4"):
        with pytest.raises(ValueError, match="cannot be streamed"):
            p.dtype_code(bad)


# -- rejections -----------------------------------------------------------------------


def test_truncated_at_every_byte() -> None:
    """Every strict prefix of a valid message is rejected, with a ProtocolError only."""
    inline, _ = data_message()
    header, payload = data_message(inline=False, shape=(40, 3), code=2)
    messages = [
        (inline, None),
        (header, payload),
        (hello_message(), None),
        (p.encode_bye(1, 0, 1, 5), None),
    ]
    for frame, second in messages:
        assert p.decode(frame, second) is not None
        for cut in range(len(frame)):
            with pytest.raises(p.ProtocolError):
                p.decode(frame[:cut], second)
        with pytest.raises(p.ProtocolError):  # one byte too many
            p.decode(frame + b"\0", second)
    assert payload is not None
    for cut in range(len(payload)):  # the payload frame cut short
        assert reason_of(header, payload[:cut]) == "bad_size"


def test_prefix_rejections() -> None:
    frame, _ = data_message()
    assert reason_of(b"") == "truncated"
    assert reason_of(frame[:15]) == "truncated"
    assert reason_of(frame[:47]) == "truncated"  # a DATA header needs 48 bytes at least
    assert reason_of(b"XTRN" + frame[4:]) == "bad_magic"
    for version in (0, 1, 3):  # version 1 counted BYE's steps over all receivers
        assert reason_of(frame[:4] + bytes([version]) + frame[5:]) == "bad_version"
    for kind in (0, 6, 255):
        assert reason_of(frame[:5] + bytes([kind]) + frame[6:]) == "bad_kind"
    bye = p.encode_bye(1, 0, 1, 1)
    assert reason_of(bye[:5] + bytes([9]) + bye[6:]) == "bad_kind"


def test_data_rejections() -> None:
    assert reason_of(*data_message(rank=1, ranks=1)) == "bad_rank"
    assert reason_of(*data_message(rank=0, ranks=0)) == "bad_rank"
    for code in (0, 13, 255):
        frame, _ = data_message(code=1)
        assert reason_of(frame[:28] + bytes([code]) + frame[29:]) == "bad_dtype"
    eight, _ = data_message(shape=(1,) * 8, count=1)  # then made to claim 9 dimensions
    nine = eight[:29] + bytes([9]) + eight[30:48] + struct.pack("<9Q", *[1] * 9) + eight[112:]
    assert reason_of(nine) == "bad_shape"
    assert reason_of(*data_message(shape=(1 << 20, 1 << 20), count=1)) == "too_large"
    assert reason_of(*data_message(shape=(10,), count=2), max_message_bytes=39) == "too_large"
    assert p.decode(*data_message(shape=(10,), count=2), max_message_bytes=40) is not None
    assert reason_of(*data_message(shape=(2, 3), offset=0, count=0)) == "bad_range"
    assert reason_of(*data_message(shape=(2, 3), offset=5, count=2)) == "bad_range"
    assert reason_of(*data_message(shape=(2, 3), offset=6, count=1)) == "bad_range"
    assert reason_of(*data_message(shape=(2, 0), count=1, payload=b"\0" * 4)) == "bad_range"
    assert reason_of(*data_message(name=b"\xff\xfe")) == "bad_name"
    # inline: the payload size must match exactly
    frame, _ = data_message()
    assert reason_of(frame[:-1]) == "bad_size"
    assert reason_of(frame + b"\0\0\0\0") == "bad_size"
    assert reason_of(frame, b"") == "unexpected_frame"
    # two frames
    header, payload = data_message(inline=False)
    assert payload is not None
    assert reason_of(header) == "missing_frame"
    assert reason_of(header, payload + b"\0") == "bad_size"
    assert reason_of(header, payload[:-4]) == "bad_size"
    assert reason_of(header + b"\0", payload) == "bad_size"
    # a header whose name runs past the end of the frame
    assert reason_of(header[:-1], payload) == "truncated"


def test_hello_and_bye_rejections() -> None:
    assert reason_of(hello_message(), b"x") == "unexpected_frame"
    assert reason_of(p.encode_bye(1, 0, 1, 1), b"x") == "unexpected_frame"
    assert reason_of(p.encode_bye(1, 0, 1, 1)[:-1]) == "bad_size"
    assert reason_of(p.encode_bye(1, 0, 1, 1) + b"\0") == "bad_size"
    assert reason_of(p.encode_bye(1, 2, 2, 1)) == "bad_rank"
    assert reason_of(p.encode_bye(1, 0, 0, 1)) == "bad_rank"
    assert reason_of(hello_message(rank=3, ranks=3)) == "bad_rank"
    assert reason_of(hello_message()[:23]) == "truncated"
    good = hello_message()
    assert reason_of(good[:-1]) == "bad_size"
    assert reason_of(good + b" ") == "bad_size"
    too_long = (
        p.PREFIX.pack(p.MAGIC, p.VERSION, p.HELLO, 0, 7)
        + p.HELLO_FIXED.pack(0, 1, p.MAX_HELLO_BYTES + 1)
        + b" " * (p.MAX_HELLO_BYTES + 1)
    )
    assert reason_of(too_long) == "bad_size"


def _field(**overrides: object) -> dict[str, object]:
    entry: dict[str, object] = {"name": "u", "dtype": "<f4", "shape": [2, 3]}
    entry.update(overrides)
    return entry


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe{}",  # not UTF-8
        b"[" * 100_000 + b"]" * 100_000,  # nesting deep enough to overflow the recursion
        [],
        "fields",
        {},
        {"fields": []},
        {"fields": 3},
        {"fields": {"u": 1}},
        {"fields": [[]]},
        {"fields": [_field(), _field()]},  # duplicate names
        {"fields": [_field(name="")]},
        {"fields": [_field(name="x" * 256)]},
        {"fields": [{"dtype": "<f4", "shape": [1]}]},
        {"fields": [{"name": "u", "shape": [1]}]},
        {"fields": [{"name": "u", "dtype": "<f4"}]},
        {"fields": [_field(dtype=">f4")]},
        {"fields": [_field(dtype="complex64")]},
        {"fields": [_field(dtype="O")]},
        {"fields": [_field(dtype="no such type")]},
        {"fields": [_field(dtype="|,)61")]},  # np.dtype raises SyntaxError on this one
        {"fields": [_field(dtype=None)]},
        {"fields": [_field(shape=[0])]},
        {"fields": [_field(shape=[-1, 2])]},
        {"fields": [_field(shape=[1] * 9)]},
        {"fields": [_field(shape=[2**64])]},
        {"fields": [_field(shape=3)]},
        {"fields": [_field(shape=[[1]])]},
        {"fields": [_field()], "parameters": []},
        {"fields": [_field()], "parameters": {"a": "x"}},
        {"fields": [_field()], "parameters": {"a": None}},
        {"fields": [_field()], "parameters": {"a": [1]}},
    ],
)
def test_bad_hello_bodies(body: object) -> None:
    assert reason_of(hello_message(body)) == "bad_hello"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"fields": [{"name": "u", "dtype": "<f4", "shape": [Infinity]}]}',
        b'{"fields": [{"name": "u", "dtype": "<f4", "shape": [NaN]}]}',
        b'{"fields": [{"name": "u", "dtype": "<f4", "shape": [1]}], "parameters": {"a": 1'
        + b"0" * 400
        + b"}}",
    ],
)
def test_hello_overflows_are_protocol_errors(raw: bytes) -> None:
    """json accepts these; converting them overflowed (an OverflowError escaped before)."""
    assert reason_of(hello_message(raw)) == "bad_hello"


def test_every_reason_is_covered_and_documented() -> None:
    """The reasons the tests above reach are all of the wire package's, each in the
    spec."""
    package = ROOT / "melissa_trainer" / "wire"
    source = "".join(path.read_text() for path in sorted(package.glob("*.py")))
    reasons = set(re.findall(r'ProtocolError\(\s*"(\w+)"', source))
    tested = set(re.findall(r'== "(\w+)"', Path(__file__).read_text()))
    assert reasons == {
        "truncated",
        "bad_magic",
        "bad_version",
        "bad_kind",
        "unexpected_frame",
        "bad_size",
        "bad_rank",
        "bad_dtype",
        "bad_shape",
        "too_large",
        "bad_range",
        "bad_name",
        "missing_frame",
        "bad_hello",
        "bad_request",  # the serving channel's (section 16)
    }
    assert reasons <= tested
    spec = SPEC.read_text()
    assert not [r for r in reasons if f"`{r}`" not in spec]


def test_predict_header_rules() -> None:
    """The serving channel's own rule (section 16): `bad_request`, for a PREDICT without
    arrays, with a malformed run id, or naming an array twice."""
    good = p.encode_predict(1, 2, 0, "run", {"u": np.ones(2, np.float32)})
    count_at = p.PREFIX.size + 12  # request id (8), timeout (4), then the array count
    no_arrays = bytearray(good[0])
    no_arrays[count_at] = 0
    bad_run = bytearray(good[0])
    bad_run[p.PREFIX.size + p.PREDICT_FIXED.size] = ord("!")
    twice = p.encode_predict(1, 2, 0, None, {"u": np.ones(2, np.float32)})
    head = bytearray(twice[0])
    head[count_at] = 2
    head += bytes(head[p.PREFIX.size + p.PREDICT_FIXED.size :])  # the same array again
    for frames in ([bytes(no_arrays)], [bytes(bad_run), good[1]], [bytes(head)] + twice[1:] * 2):
        try:
            p.decode_predict(frames, 1 << 20)
        except p.ProtocolError as exc:
            assert exc.reason == "bad_request"
        else:
            raise AssertionError("accepted")


# -- the specification's worked examples ----------------------------------------------


def spec_dump(label: str) -> bytes:
    """The bytes of the hex dump that follows `<!-- hexdump:LABEL -->` in the spec."""
    spec = SPEC.read_text()
    block = spec.split(f"<!-- hexdump:{label} -->", 1)[1].split("```", 2)[1]
    assert block.startswith("text\n"), block[:20]
    out = bytearray()
    for line in block.splitlines()[1:]:
        offset, hex_part = line.split("|")[0].split(maxsplit=1)
        assert int(offset, 16) == len(out)
        out += bytes.fromhex(hex_part)
    return bytes(out)


def test_spec_hex_dumps_are_encoder_output() -> None:
    payload = np.array([-0.5, 0.25], dtype="<f4").tobytes()
    # what a client that checked the payload sends: INLINE and FINITE
    data = p.encode_data_header(7, 3, 1, 2, b"u", 1, (2, 2), 2, 2, True, finite=True) + payload
    assert spec_dump("data") == data
    msg = p.decode(data)
    assert isinstance(msg, p.Data) and msg.offset == 2 and msg.elements == 2 and msg.finite
    u = [p.FieldSpec("u", np.dtype("<f4"), (2, 2))]
    hello = p.encode_hello(7, 1, 2, u, {"t0": 300.0}, client="python")  # as the client sends
    assert spec_dump("hello") == hello
    assert spec_dump("bye") == p.encode_bye(7, 1, 2, 10)


def test_spec_serving_hex_dumps_are_encoder_output() -> None:
    """Section 16's worked example: PREDICT, PREDICTION and REFUSED as encoded."""
    u = np.array([1.5, -2.0], "<f4")
    predict = p.encode_predict(7, 5, 500, None, {"u": u})
    assert spec_dump("predict") == predict[0] and bytes(predict[1]).hex() == "0000c03f000000c0"
    request = p.decode_predict([spec_dump("predict"), u.tobytes()], 1 << 20)
    assert (request.simulation_id, request.request_id, request.timeout_ms) == (7, 5, 500)
    y = np.array([0.75], "<f4")
    prediction = p.encode_prediction(7, 5, 120, {"prediction": y})
    assert spec_dump("prediction") == prediction[0] and bytes(prediction[1]).hex() == "0000403f"
    refused = p.encode_refused(7, 5, 120, "busy", "64 requests wait already", 100)
    assert spec_dump("refused") == refused


def test_spec_dtype_table() -> None:
    spec = SPEC.read_text().replace("\\|", "|")  # markdown escapes | in table cells
    rows = re.findall(r"^\| (\d+) \| `(.+?)` \| (\w+) \| (\d+) \|", spec, re.MULTILINE)
    assert {int(c): (s, n, int(i)) for c, s, n, i in rows} == {
        code: (dt.str, dt.name, dt.itemsize) for code, dt in p.DTYPES.items()
    }


# -- fuzzing --------------------------------------------------------------------------


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


# -- the wire layout's one home -------------------------------------------------------


def test_offsets_name_the_fields_the_structs_pack() -> None:
    """The `*_AT` offsets that hot paths peek at are where `encode_*` puts each field."""
    header = p.encode_data_header(
        0x0102030405060708, 2**63 + 5, 3, 7, b"temp", 1, (4, 5), 2, 9, True
    )
    assert header[p.KIND_AT] == p.DATA and header[p.FLAGS_AT] & p.FLAG_INLINE
    assert p.U64.unpack_from(header, p.SIMULATION_ID_AT)[0] == 0x0102030405060708
    assert p.U64.unpack_from(header, p.TIME_STEP_AT)[0] == 2**63 + 5
    assert struct.unpack_from("<HH", header, p.AFTER_TIME_STEP_AT) == (3, 7)
    assert (header[p.NDIM_AT], header[p.NAME_LEN_AT]) == (2, 4)
    end = p.DATA_HEADER_BYTES + p.DIM_BYTES * header[p.NDIM_AT] + header[p.NAME_LEN_AT]
    assert end == len(header) and header[end - 4 :] == b"temp"
    batch = p.encode_batch_header(11, 6, 0, 1, b"u", 2, (3,), 0, 3)
    assert batch[p.KIND_AT] == p.BATCH and p.U64.unpack_from(batch, p.RECORDS_AT)[0] == 6
    assert p.U64.unpack_from(p.encode_bye(12, 0, 1, 3), p.SIMULATION_ID_AT)[0] == 12


def test_split_at_time_step_and_peek_simulation_id() -> None:
    header = p.encode_data_header(42, 0, 0, 1, b"u", 1, (2,), 0, 2, False)
    head, tail = p.split_at_time_step(header)
    assert head + p.U64.pack(77) + tail == p.encode_data_header(
        42, 77, 0, 1, b"u", 1, (2,), 0, 2, False
    )
    assert p.peek_simulation_id(header) == 42
    assert p.peek_simulation_id(memoryview(p.encode_abandon(9))) == 9
    assert p.peek_simulation_id(b"XXXX" + header[4:]) is None  # not ours
    assert p.peek_simulation_id(header[:15]) is None  # too short to say


def test_no_wire_layout_outside_protocol() -> None:
    """Every Struct and by-hand integer read of the wire format is in the protocol
    package (`stream/protocol/`, which these globs do not reach)."""
    root = Path(p.__file__).parents[2]
    offenders = []
    for path in [*root.glob("stream/*.py"), *root.glob("client/*.py")]:
        text = path.read_text()
        for needle in ("import struct", "struct.Struct(", ".from_bytes(", '"<Q"'):
            if needle in text:
                offenders.append(f"{path.relative_to(root)}: {needle}")
    assert not offenders


@pytest.mark.parametrize(
    "entry, parameters",
    [
        ({"name": "x", "dtype": "<f4", "shape": [2.5]}, {}),  # was read as 2
        ({"name": "x", "dtype": "<f4", "shape": [True]}, {}),  # was read as 1
        ({"name": "x", "dtype": "<f4", "shape": ["2"]}, {}),
        ({"name": "x", "dtype": "float32", "shape": [2]}, {}),  # an alias, not section 9's
        ({"name": "x", "dtype": "f4", "shape": [2]}, {}),
        ({"name": 5, "dtype": "<f4", "shape": [2]}, {}),  # was read as "5"
        ({"name": "x", "dtype": "<f4", "shape": [2]}, {"p": "1.5"}),  # was read as 1.5
        ({"name": "x", "dtype": "<f4", "shape": [2]}, {"p": True}),  # was read as 1.0
    ],
)
def test_hello_body_types_are_not_converted(entry: dict, parameters: dict) -> None:
    """docs/protocol.md section 6: shapes are integers, dtypes section 9's strings, names
    strings, parameters numbers; other JSON values are bad_hello, not coerced (found by
    the fuzz test's reference decoder)."""
    body = json.dumps({"fields": [entry], "parameters": parameters}).encode()
    frame = p.PREFIX.pack(p.MAGIC, p.VERSION, p.HELLO, 0, 7) + p.HELLO_FIXED.pack(0, 1, len(body))
    with pytest.raises(p.ProtocolError) as info:
        p.decode(frame + body)
    assert info.value.reason == "bad_hello"
