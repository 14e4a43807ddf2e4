"""The wire's layout: the header sizes, the dtype codes, the offsets of the fields the
structs pack, splitting at the time step and peeking the simulation id, and no wire
layout outside the `wire` package.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer import wire as p


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
