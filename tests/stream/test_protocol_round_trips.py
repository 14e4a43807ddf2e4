"""The wire protocol's round trips: HELLO (its optional client name never refused, its body's
types not converted), DATA of every dtype (zero-dimensional arrays and views too), BYE.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from protocol_messages import data_message

from melissa_trainer import wire as p


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
