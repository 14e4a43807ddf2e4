"""The serving channel's bytes, pinned (docs/protocol.md, section 16): a DESCRIBE, its
DESCRIPTION of two inputs, and a PREDICT of two inputs with its PREDICTION of two
outputs (other dtypes and shapes), each written out here byte by byte from the
protocol's tables (and as clients/c/src/predict_describe.c reads a DESCRIPTION), not
produced by the code under test. The Python encoders must produce exactly these bytes
and the decoders read them back, so that moving the codec (one implementation of the
array descriptions, `wire.predict_describe`) cannot change what goes on the wire.

Multi-byte values are chosen with distinct bytes (simulation id 0x0102, request id
0x0a0b0c0d, model version 0x1234) so that a byte order or an offset wrong shows.
"""

from __future__ import annotations

import numpy as np
import pytest

from melissa_trainer import wire
from melissa_trainer.wire import FieldSpec
from melissa_trainer.wire.predict import decode_answer
from melissa_trainer.wire.predict_describe import (
    Description,
    described,
    encode_describe,
    encode_description,
    is_describe,
)

pytestmark = pytest.mark.timeout(30)

SIM = 0x0102
REQUEST = 0x0A0B0C0D
VERSION = 0x1234


def _hex(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts).replace(" ", ""))


# DESCRIBE: a PREDICT header (kind 6) with flags 1, no array, no run id: 30 bytes.
DESCRIBE = _hex(
    "4d54524e 02 06 0100",  # magic, version 2, kind 6 (PREDICT), flags 0x0001 (u16)
    "0201000000000000",  # simulation id 0x0102 (u64)
    "0d0c0b0a00000000",  # request id (u64)
    "00000000",  # timeout (u32): the trainer ignores it
    "00 00",  # arrays n = 0, run id length R = 0
)

# DESCRIPTION: a PREDICTION header (kind 7) with flags 1, one description per input.
INPUTS = [
    FieldSpec("u", np.dtype("<f4"), (4, 3)),
    FieldSpec("k", np.dtype("<i8"), ()),
]
DESCRIPTION = _hex(
    "4d54524e 02 07 0100",  # kind 7 (PREDICTION), flags 0x0001
    "0201000000000000",  # the DESCRIBE's simulation id
    "0d0c0b0a00000000",  # the DESCRIBE's request id
    "3412000000000000",  # model version 0x1234 (u64)
    "02 00",  # n = 2 inputs, reserved 0
    "01 02 01 00",  # "u": dtype 1 (<f4), ndim 2, name length 1, reserved
    "0400000000000000 0300000000000000",  # shape (4, 3)
    "75",  # "u"
    "07 00 01 00",  # "k": dtype 7 (<i8), ndim 0, name length 1, reserved
    "6b",  # "k"
)

# PREDICT of the two inputs, with a run id and a timeout.
PREDICT_HEAD = _hex(
    "4d54524e 02 06 0000",  # kind 6, flags 0
    "0201000000000000",  # simulation id
    "0e0c0b0a00000000",  # request id 0x0a0b0c0e
    "dc050000",  # timeout 1500 ms (u32)
    "02 02",  # n = 2 arrays, run id length 2
    "7231",  # run id "r1"
    "01 02 01 00 0400000000000000 0300000000000000 75",  # "u": <f4 (4, 3)
    "07 00 01 00 6b",  # "k": <i8 ()
)
PREDICT_PAYLOADS = [_hex("0000803f" * 12), _hex("feffffffffffffff")]  # 1.0 x 12; -2

# PREDICTION of two outputs: <f8 (2,) and bool (1, 3), a 4-byte name.
PREDICTION_HEAD = _hex(
    "4d54524e 02 07 0000",  # kind 7, flags 0
    "0201000000000000",  # the request's simulation id
    "0e0c0b0a00000000",  # the request's id
    "3412000000000000",  # model version
    "02 00",  # n = 2, reserved
    "02 01 01 00 0200000000000000 79",  # "y": dtype 2 (<f8), shape (2,)
    "0c 02 04 00 0100000000000000 0300000000000000 6d61736b",  # "mask": bool (1, 3)
)
PREDICTION_PAYLOADS = [_hex("000000000000e03f 000000000000f0bf"), _hex("010001")]  # .5 -1; T F T


def test_describe_bytes() -> None:
    assert len(DESCRIBE) == 30
    assert encode_describe(SIM, REQUEST) == DESCRIBE
    assert is_describe([DESCRIBE])
    # (the trainer reads the DESCRIBE's simulation and request ids into its answer)
    assert described([DESCRIBE], INPUTS, VERSION) == DESCRIPTION


def test_description_bytes() -> None:
    assert len(DESCRIPTION) == 34 + 21 + 5
    assert encode_description(SIM, REQUEST, VERSION, INPUTS) == DESCRIPTION
    assert decode_answer([DESCRIPTION], 1 << 20) == Description(SIM, REQUEST, VERSION, INPUTS)


def test_predict_bytes() -> None:
    arrays = {"u": np.ones((4, 3), "<f4"), "k": np.array(-2, "<i8")}
    frames = wire.encode_predict(SIM, REQUEST + 1, 1500, "r1", arrays)
    assert [bytes(f) for f in frames] == [PREDICT_HEAD, *PREDICT_PAYLOADS]
    request = wire.decode_predict([PREDICT_HEAD, *PREDICT_PAYLOADS], 1 << 20)
    assert (request.simulation_id, request.request_id) == (SIM, REQUEST + 1)
    assert (request.timeout_ms, request.run_id) == (1500, "r1")
    assert list(request.arrays) == ["u", "k"]
    for name, arr in arrays.items():
        got = request.arrays[name]
        assert (got.dtype, got.shape) == (arr.dtype, arr.shape)
        np.testing.assert_array_equal(got, arr)


def test_prediction_bytes() -> None:
    arrays = {"y": np.array([0.5, -1.0], "<f8"), "mask": np.array([[True, False, True]])}
    frames = wire.encode_prediction(SIM, REQUEST + 1, VERSION, arrays)
    assert [bytes(f) for f in frames] == [PREDICTION_HEAD, *PREDICTION_PAYLOADS]
    reply = wire.decode_reply([PREDICTION_HEAD, *PREDICTION_PAYLOADS], 1 << 20)
    assert isinstance(reply, wire.Prediction)
    assert (reply.simulation_id, reply.request_id, reply.version) == (SIM, REQUEST + 1, VERSION)
    assert list(reply.arrays) == ["y", "mask"]
    for name, arr in arrays.items():
        got = reply.arrays[name]
        assert (got.dtype, got.shape) == (arr.dtype, arr.shape)
        np.testing.assert_array_equal(got, arr)
    # (a DESCRIPTION's decoder passes a PREDICTION on: the flags tell them apart)
    answer = decode_answer([PREDICTION_HEAD, *PREDICTION_PAYLOADS], 1 << 20)
    assert isinstance(answer, wire.Prediction) and answer.version == VERSION
    assert list(answer.arrays) == ["y", "mask"]
