"""The close receipt (docs/protocol.md, section 17b): a simulation closing asks each
receiver, on its follow socket, whether it took the simulation, whether it has
*ingested* this client rank's BYE (and so everything that rank sent it before), how
many of the simulation's steps it holds and how many of its samples it refused as
non-finite. PUSH/PULL acknowledges nothing: a BYE that left the client may still sit in
a queue towards a trainer that dies before reading it (`melissa_trainer.client.confirm`).
Standard library only.

RECEIPT_QUERY (kind 13): the prefix (flags 0, the simulation id), then
`RECEIPT_QUERY_FIXED` (request id, the count this rank's BYE carried to that receiver,
client rank, client count, the run id's length, a reserved zero byte), then the run id
the simulation's HELLO carried: 0 to `MAX_RUN_ID_CHARS` ASCII letters, digits, ``-`` or
``_`` (0: none, unchecked). The receiver may hold the query until it can confirm that
BYE, for a bounded time (`stream.follow_server.RECEIPT_HOLD`), then answer as it stands.

RECEIPT (kind 14): the prefix (flags 0, the simulation id asked about), then
`RECEIPT_FIXED` (request id, the receiver's rank and world size, the admission status
as ADMISSION's, the BYE status, the reason's length, the steps held, the BYE's count,
the samples refused as non-finite), then the reason: exactly that many bytes of UTF-8,
present (1 to `MAX_REASON_BYTES`) with admission status refused alone.

Both are validated before anything is built from them and raise `ProtocolError` with a
short `reason`; nothing is unpickled. The kinds are additions on the follow socket, not
a new version (section 13): a receiver that answers them says so in its rendezvous file
(``follow_kinds``), and a client asks an older one the ADMISSION_QUERY instead.
"""

from __future__ import annotations

from typing import NamedTuple

from melissa_trainer.wire.admission import ADMISSION_REFUSED, ADMISSION_STATUSES, MAX_REASON_BYTES
from melissa_trainer.wire.held import checked_prefix
from melissa_trainer.wire.layout import (
    MAGIC,
    MAX_RUN_ID_CHARS,
    PREFIX,
    RECEIPT,
    RECEIPT_FIXED,
    RECEIPT_QUERY,
    RECEIPT_QUERY_FIXED,
    VERSION,
)
from melissa_trainer.wire.messages import ProtocolError

__all__ = [
    "MAX_RECEIPT_QUERY_BYTES",
    "RECEIPT_BYE",
    "RECEIPT_BYE_STATUSES",
    "RECEIPT_FINISHED",
    "RECEIPT_NO_BYE",
    "ReceiptQuery",
    "ReceiptReply",
    "confirms",
    "decode_receipt",
    "decode_receipt_query",
    "encode_receipt",
    "encode_receipt_query",
]

MAX_RECEIPT_QUERY_BYTES = PREFIX.size + RECEIPT_QUERY_FIXED.size + MAX_RUN_ID_CHARS  # 102

#: BYE statuses: this client rank's BYE not ingested here (yet); ingested (its count in
#: ``bye_steps``); the simulation finished here (every rank's BYE and every step in).
RECEIPT_NO_BYE, RECEIPT_BYE, RECEIPT_FINISHED = 0, 1, 2
RECEIPT_BYE_STATUSES = {RECEIPT_NO_BYE: "no BYE", RECEIPT_BYE: "BYE",
                        RECEIPT_FINISHED: "finished"}  # fmt: skip
_RUN_ID_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


class ReceiptQuery(NamedTuple):
    """A decoded RECEIPT_QUERY: who asks (`client_rank` of `client_count`, the run id
    its HELLO carried, None if none) and the count its BYE to this receiver carried
    (`bye_steps`: what a confirmation must say)."""

    simulation_id: int
    request_id: int
    bye_steps: int
    client_rank: int
    client_count: int
    run_id: str | None


class ReceiptReply(NamedTuple):
    """A decoded RECEIPT: what receiver `rank` of `world_size` has of `simulation_id`.

    `admission` is an ADMISSION status (`reason` non-empty when refused, else empty);
    `bye` a BYE status; `steps` the simulation's time steps the receiver holds (those
    refused as non-finite included: they count as received); `bye_steps` the count the
    asking rank's BYE carried (0 unless `bye` is RECEIPT_BYE); `nonfinite` the
    simulation's samples this receiver refused for NaN or Inf since it started."""

    simulation_id: int
    request_id: int
    rank: int
    world_size: int
    admission: int
    bye: int
    reason: str
    steps: int
    bye_steps: int
    nonfinite: int


def confirms(admission: int, bye: int, bye_steps: int, expected: int) -> bool | None:
    """Whether a RECEIPT saying (`admission`, `bye`, `bye_steps`) decides a query whose
    BYE carried `expected`: True if it confirms that BYE (the simulation finished, or
    that rank's BYE is in with that count: one of an earlier attempt with another count
    is not this one's), False if the simulation was refused, None if not yet."""
    if admission == ADMISSION_REFUSED:
        return False
    if bye == RECEIPT_FINISHED or (bye == RECEIPT_BYE and bye_steps == expected):
        return True
    return None


def encode_receipt_query(
    simulation_id: int,
    request_id: int,
    bye_steps: int,
    client_rank: int,
    client_count: int,
    run_id: str | None,
) -> bytes:
    """A RECEIPT_QUERY frame (`run_id` as the HELLO's: checked by the caller)."""
    run = b"" if run_id is None else run_id.encode("ascii")
    head = PREFIX.pack(MAGIC, VERSION, RECEIPT_QUERY, 0, simulation_id)
    fixed = RECEIPT_QUERY_FIXED.pack(request_id, bye_steps, client_rank, client_count, len(run), 0)
    return head + fixed + run


def decode_receipt_query(frame: bytes) -> ReceiptQuery:
    """A RECEIPT_QUERY, validated: prefix, fixed part, rank below count, the reserved
    byte zero, a run id of exactly its length made of the allowed characters.

    Raises:
        ProtocolError: anything else.
    """
    frame = bytes(frame)
    simulation_id = checked_prefix(frame, RECEIPT_QUERY)
    end = PREFIX.size + RECEIPT_QUERY_FIXED.size
    if len(frame) < end:
        raise ProtocolError("truncated", f"RECEIPT_QUERY of {len(frame)} bytes")
    request_id, bye_steps, rank, count, size, reserved = RECEIPT_QUERY_FIXED.unpack_from(
        frame, PREFIX.size
    )
    if reserved:
        raise ProtocolError("bad_request", "reserved byte not zero")
    if not 0 <= rank < count:
        raise ProtocolError("bad_rank", f"client rank {rank} of {count}")
    if size > MAX_RUN_ID_CHARS or len(frame) != end + size:
        raise ProtocolError("bad_size", f"RECEIPT_QUERY of {len(frame)} bytes, run id of {size}")
    run = frame[end:]
    if not set(run) <= _RUN_ID_BYTES:
        raise ProtocolError("bad_request", "a run id of other characters than [A-Za-z0-9_-]")
    run_id = run.decode("ascii") or None
    return ReceiptQuery(simulation_id, request_id, bye_steps, rank, count, run_id)


def encode_receipt(
    simulation_id: int,
    request_id: int,
    rank: int,
    world_size: int,
    admission: int,
    bye: int,
    reason: str = "",
    steps: int = 0,
    bye_steps: int = 0,
    nonfinite: int = 0,
) -> bytes:
    """A RECEIPT frame; `reason` (refused only) is cut to `MAX_REASON_BYTES`."""
    if admission not in ADMISSION_STATUSES or bye not in RECEIPT_BYE_STATUSES:
        raise ValueError(f"unknown RECEIPT statuses {admission}, {bye}")
    text = reason.encode("utf-8")[:MAX_REASON_BYTES].decode("utf-8", "ignore").encode("utf-8")
    if admission != ADMISSION_REFUSED:
        text = b""
    elif not text:
        text = b"refused"
    if bye != RECEIPT_BYE:
        bye_steps = 0
    head = PREFIX.pack(MAGIC, VERSION, RECEIPT, 0, simulation_id)
    fixed = RECEIPT_FIXED.pack(
        request_id, rank, world_size, admission, bye, len(text), steps, bye_steps, nonfinite
    )
    return head + fixed + text


def decode_receipt(frame: bytes) -> ReceiptReply:
    """A RECEIPT, validated: prefix, fixed part, both statuses, rank below world size,
    a BYE count only with status RECEIPT_BYE, non-finite samples no more than the steps
    held, a reason of exactly its length, valid UTF-8, present with admission refused
    alone.

    Raises:
        ProtocolError: anything else.
    """
    frame = bytes(frame)
    simulation_id = checked_prefix(frame, RECEIPT)
    end = PREFIX.size + RECEIPT_FIXED.size
    if len(frame) < end:
        raise ProtocolError("truncated", f"RECEIPT of {len(frame)} bytes")
    request_id, rank, world, admission, bye, size, steps, bye_steps, nonfinite = (
        RECEIPT_FIXED.unpack_from(frame, PREFIX.size)
    )
    if admission not in ADMISSION_STATUSES or bye not in RECEIPT_BYE_STATUSES:
        raise ProtocolError("bad_request", f"RECEIPT statuses {admission}, {bye}")
    if not 0 <= rank < world:
        raise ProtocolError("bad_rank", f"rank {rank} of {world}")
    if (bye != RECEIPT_BYE and bye_steps) or nonfinite > steps:
        raise ProtocolError("bad_request", f"{bye_steps} BYE steps, {nonfinite} of {steps}")
    if size > MAX_REASON_BYTES or (admission == ADMISSION_REFUSED) != (size > 0):
        raise ProtocolError("bad_size", f"a reason of {size} bytes with status {admission}")
    if len(frame) != end + size:
        raise ProtocolError("bad_size", f"RECEIPT of {len(frame)} bytes, reason of {size}")
    try:
        reason = frame[end:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError("bad_request", "a reason that is not UTF-8") from exc
    return ReceiptReply(
        simulation_id, request_id, rank, world, admission, bye, reason, steps, bye_steps, nonfinite
    )
