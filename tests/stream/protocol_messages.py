"""What the wire protocol's tests share (test_protocol_*.py): valid DATA and HELLO messages
to start from (`data_message`, `hello_message`), and the specification (`SPEC`,
docs/protocol.md) with its hex dumps (`spec_dump`, which tests/client/test_client_send.py
imports too).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from melissa_trainer import wire as p

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
