"""Every rejection reason of the wire protocol: a message truncated at every byte, bad
prefixes, DATA, HELLO and BYE rejections, bad HELLO bodies and overflows (protocol
errors, not crashes), PREDICT header rules; every reason is covered here and documented
in docs/protocol.md.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from protocol_messages import ROOT, SPEC, data_message, hello_message

from melissa_trainer import wire as p


def reason_of(frame: bytes, payload: bytes | None = None, **kwargs: int) -> str:
    with pytest.raises(p.ProtocolError) as info:
        p.decode(frame, payload, **kwargs)
    return info.value.reason


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
            with pytest.raises(p.ProtocolError, match="^(truncated|bad_size): "):
                p.decode(frame[:cut], second)
        with pytest.raises(p.ProtocolError, match="^bad_size: "):  # one byte too many
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
