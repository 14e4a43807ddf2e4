"""The admission query (docs/protocol.md, section 17a): a simulation closing asks each
receiver, on its follow socket, whether it took the simulation or refused its HELLO
(and why). PUSH/PULL acknowledges nothing: without it a simulation whose fields the
study refuses ends as if it had been trained on (`melissa_trainer.client.admission`).
Standard library only.

ADMISSION_QUERY: the prefix (kind ADMISSION_QUERY, flags 0, the simulation id), then a
u64 request id. Exactly `ADMISSION_QUERY_BYTES` bytes.

ADMISSION: the prefix (kind ADMISSION, flags 0, the simulation id asked about), then
`ADMISSION_FIXED` (request id, the receiver's rank and world size, a status, a reserved
zero byte, the reason's length), then the reason: exactly that many bytes of UTF-8,
present (1 to `MAX_REASON_BYTES`) with status ADMISSION_REFUSED alone.

Both are validated before anything is built from them, and raise `ProtocolError` with a
short `reason`; nothing is unpickled.
"""

from __future__ import annotations

from typing import NamedTuple

from melissa_trainer.wire.held import checked_prefix, decode_query
from melissa_trainer.wire.layout import (
    ADMISSION,
    ADMISSION_FIXED,
    ADMISSION_QUERY,
    MAGIC,
    PREFIX,
    U64,
    VERSION,
)
from melissa_trainer.wire.messages import ProtocolError

__all__ = [
    "ADMISSION_ACCEPTED",
    "ADMISSION_QUERY_BYTES",
    "ADMISSION_REFUSED",
    "ADMISSION_STATUSES",
    "ADMISSION_UNKNOWN",
    "MAX_REASON_BYTES",
    "AdmissionReply",
    "decode_admission",
    "decode_admission_query",
    "encode_admission",
    "encode_admission_query",
]

#: ADMISSION statuses: no HELLO of the simulation processed here yet (ask again); its
#: HELLO was taken; its HELLO was refused (the reason says why and what to do).
ADMISSION_UNKNOWN, ADMISSION_ACCEPTED, ADMISSION_REFUSED = 0, 1, 2
ADMISSION_STATUSES = {ADMISSION_UNKNOWN: "unknown", ADMISSION_ACCEPTED: "accepted",
                      ADMISSION_REFUSED: "refused"}  # fmt: skip
ADMISSION_QUERY_BYTES = PREFIX.size + U64.size
#: the longest reason an ADMISSION carries (a longer one is cut, on a character)
MAX_REASON_BYTES = 4096


class AdmissionReply(NamedTuple):
    """A decoded ADMISSION: what receiver `rank` of `world_size` did with
    `simulation_id`'s HELLO (`status`; `reason` non-empty when refused, else empty)."""

    simulation_id: int
    request_id: int
    rank: int
    world_size: int
    status: int
    reason: str


def encode_admission_query(simulation_id: int, request_id: int) -> bytes:
    """An ADMISSION_QUERY frame."""
    return PREFIX.pack(MAGIC, VERSION, ADMISSION_QUERY, 0, simulation_id) + U64.pack(request_id)


def encode_admission(
    simulation_id: int, request_id: int, rank: int, world_size: int, status: int, reason: str = ""
) -> bytes:
    """An ADMISSION frame; `reason` (refused only) is cut to `MAX_REASON_BYTES`."""
    if status not in ADMISSION_STATUSES:
        raise ValueError(f"unknown ADMISSION status {status}")
    text = reason.encode("utf-8")[:MAX_REASON_BYTES].decode("utf-8", "ignore").encode("utf-8")
    if status != ADMISSION_REFUSED:
        text = b""
    elif not text:
        text = b"refused"
    head = PREFIX.pack(MAGIC, VERSION, ADMISSION, 0, simulation_id)
    return head + ADMISSION_FIXED.pack(request_id, rank, world_size, status, 0, len(text)) + text


def decode_admission_query(frame: bytes) -> tuple[int, int]:
    """(simulation id, request id) of an ADMISSION_QUERY, validated.

    Raises:
        ProtocolError: not exactly an ADMISSION_QUERY.
    """
    return decode_query(frame, ADMISSION_QUERY, ADMISSION_QUERY_BYTES, "ADMISSION_QUERY")


def decode_admission(frame: bytes) -> AdmissionReply:
    """An ADMISSION, validated: prefix, fixed part, status, rank below world size, the
    reserved byte zero, a reason of exactly its length, valid UTF-8, present with
    status refused alone.

    Raises:
        ProtocolError: anything else.
    """
    frame = bytes(frame)
    simulation_id = checked_prefix(frame, ADMISSION)
    end = PREFIX.size + ADMISSION_FIXED.size
    if len(frame) < end:
        raise ProtocolError("truncated", f"ADMISSION of {len(frame)} bytes")
    request_id, rank, world, status, reserved, size = ADMISSION_FIXED.unpack_from(
        frame, PREFIX.size
    )
    if status not in ADMISSION_STATUSES:
        raise ProtocolError("bad_request", f"ADMISSION status {status}")
    if reserved:
        raise ProtocolError("bad_request", "reserved byte not zero")
    if not 0 <= rank < world:
        raise ProtocolError("bad_rank", f"rank {rank} of {world}")
    if size > MAX_REASON_BYTES or (status == ADMISSION_REFUSED) != (size > 0):
        raise ProtocolError("bad_size", f"a reason of {size} bytes with status {status}")
    if len(frame) != end + size:
        raise ProtocolError("bad_size", f"ADMISSION of {len(frame)} bytes, reason of {size}")
    try:
        reason = frame[end:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("bad_request", "a reason that is not UTF-8") from exc
    return AdmissionReply(simulation_id, request_id, rank, world, status, reason)
