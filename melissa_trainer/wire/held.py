"""The follow channel (docs/protocol.md, section 17): a running simulation whose trainer
was restarted asks each resumed receiver which of its time steps the checkpoint it
resumed from holds (HELD_QUERY), and gets them as a bit array (HELD): what it must send
again, from its replay window (`melissa_trainer.client.follow`). On the receiver's
follow socket (ZeroMQ DEALER -> ROUTER), never on the stream's PULL socket (whose
receiver rejects these kinds as ``bad_kind``). Standard library only.

HELD_QUERY: the prefix (kind HELD_QUERY, flags 0, the simulation id), then a u64
request id. Exactly `HELD_QUERY_BYTES` bytes.

HELD: the prefix (kind HELD, flags 0, the simulation id asked about), then
`HELD_FIXED` (request id, the receiver's rank and world size, a status, two reserved
zero fields, the bit count), then ``ceil(bits / 8)`` bytes: bit i (byte ``i >> 3``, bit
``i & 7``, least significant first) set when the receiver holds the simulation's time
step ``i * world_size + first_step`` (its *local* step i ``= t // world_size``: a
receiver gets the steps t with ``receiver_of(simulation_id, t, world_size, routing) ==
rank``, `routing`; the routing is the simulation's, which its client knows and the
reply does not repeat). Nothing else: a reply of any other length is malformed.

Both are validated before anything is built from them (`decode_held_query`,
`decode_held`), and raise `ProtocolError` with a short `reason`; nothing is unpickled.
"""

from __future__ import annotations

from typing import NamedTuple

from melissa_trainer.wire.layout import HELD, HELD_FIXED, HELD_QUERY, MAGIC, PREFIX, U64, VERSION
from melissa_trainer.wire.messages import ProtocolError
from melissa_trainer.wire.routing import receiver_of

__all__ = [
    "HELD_ABANDONED",
    "HELD_FINISHED",
    "HELD_NONE",
    "HELD_QUERY_BYTES",
    "HELD_STATUSES",
    "HELD_STEPS",
    "HeldReply",
    "checked_prefix",
    "decode_held",
    "decode_held_query",
    "encode_held",
    "encode_held_query",
]

#: HELD statuses: the checkpoint holds nothing of the simulation (it had sent nothing
#: there, or the receiver resumed from no checkpoint); the steps in the bit array;
#: every step it sent (it finished there); nothing will be taken (it was abandoned).
HELD_NONE, HELD_STEPS, HELD_FINISHED, HELD_ABANDONED = 0, 1, 2, 3
HELD_STATUSES = {HELD_NONE: "none", HELD_STEPS: "steps", HELD_FINISHED: "finished",
                 HELD_ABANDONED: "abandoned"}  # fmt: skip
HELD_QUERY_BYTES = PREFIX.size + U64.size
#: the most local steps one HELD describes (a bit array of 128 MiB at most)
MAX_HELD_BITS = 1 << 30


class HeldReply(NamedTuple):
    """A decoded HELD: which of `simulation_id`'s steps receiver `rank` of `world_size`
    holds (`bits`, as the module docstring says; empty unless `status` is HELD_STEPS)."""

    simulation_id: int
    request_id: int
    rank: int
    world_size: int
    status: int
    nbits: int
    bits: bytes

    def holds(self, step: int, routing: str | None = None) -> bool:
        """Whether time step `step` (one this receiver gets under `routing`, the
        simulation's: `routing.receiver_of`) is held."""
        if self.status == HELD_FINISHED:
            return True
        if self.status != HELD_STEPS:
            return False
        if receiver_of(self.simulation_id, step, self.world_size, routing) != self.rank:
            return False
        i = step // self.world_size
        return i < self.nbits and bool(self.bits[i >> 3] >> (i & 7) & 1)


def encode_held_query(simulation_id: int, request_id: int) -> bytes:
    """A HELD_QUERY frame."""
    return PREFIX.pack(MAGIC, VERSION, HELD_QUERY, 0, simulation_id) + U64.pack(request_id)


def encode_held(
    simulation_id: int,
    request_id: int,
    rank: int,
    world_size: int,
    status: int,
    nbits: int = 0,
    bits: bytes = b"",
) -> bytes:
    """A HELD frame; `bits` is trimmed or zero-padded to ``ceil(nbits / 8)`` bytes."""
    if status not in HELD_STATUSES:
        raise ValueError(f"unknown HELD status {status}")
    if status != HELD_STEPS:
        nbits, bits = 0, b""
    size = (nbits + 7) // 8
    body = bytes(bits[:size]).ljust(size, b"\0")
    head = PREFIX.pack(MAGIC, VERSION, HELD, 0, simulation_id)
    return head + HELD_FIXED.pack(request_id, rank, world_size, status, 0, 0, nbits) + body


def checked_prefix(frame: bytes, kind: int) -> int:
    """The simulation id of a frame of `kind`, its prefix checked."""
    if len(frame) < PREFIX.size:
        raise ProtocolError("truncated", f"{len(frame)} bytes, shorter than the prefix")
    magic, version, got, flags, simulation_id = PREFIX.unpack_from(frame)
    if magic != MAGIC:
        raise ProtocolError("bad_magic", f"magic {magic!r}")
    if version != VERSION:
        raise ProtocolError("bad_version", f"version {version}, expected {VERSION}")
    if got != kind:
        raise ProtocolError("bad_kind", f"kind {got}, expected {kind}")
    if flags:
        raise ProtocolError("bad_request", f"flags {flags:#x}")
    return int(simulation_id)


def decode_held_query(frame: bytes) -> tuple[int, int]:
    """(simulation id, request id) of a HELD_QUERY, validated.

    Raises:
        ProtocolError: not exactly a HELD_QUERY.
    """
    return decode_query(frame, HELD_QUERY, HELD_QUERY_BYTES, "HELD_QUERY")


def decode_query(frame: bytes, kind: int, size: int, name: str) -> tuple[int, int]:
    """(simulation id, request id) of a follow socket's query of `kind` (its prefix,
    then a u64 request id: `size` bytes exactly; `name` for the error), validated.

    Raises:
        ProtocolError: not exactly such a query.
    """
    frame = bytes(frame)
    simulation_id = checked_prefix(frame, kind)
    if len(frame) != size:
        raise ProtocolError("bad_size", f"{name} of {len(frame)} bytes")
    return simulation_id, int(U64.unpack_from(frame, PREFIX.size)[0])


def decode_held(frame: bytes) -> HeldReply:
    """A HELD, validated: prefix, fixed part, status, rank below world size, reserved
    fields zero, the bit array exactly ``ceil(bits / 8)`` bytes.

    Raises:
        ProtocolError: anything else.
    """
    frame = bytes(frame)
    simulation_id = checked_prefix(frame, HELD)
    end = PREFIX.size + HELD_FIXED.size
    if len(frame) < end:
        raise ProtocolError("truncated", f"HELD of {len(frame)} bytes")
    request_id, rank, world, status, r1, r2, nbits = HELD_FIXED.unpack_from(frame, PREFIX.size)
    if status not in HELD_STATUSES:
        raise ProtocolError("bad_request", f"HELD status {status}")
    if r1 or r2:
        raise ProtocolError("bad_request", "reserved fields not zero")
    if not 0 <= rank < world:
        raise ProtocolError("bad_rank", f"rank {rank} of {world}")
    if nbits > MAX_HELD_BITS or (status != HELD_STEPS and nbits):
        raise ProtocolError("bad_size", f"{nbits} bits with status {status}")
    if len(frame) != end + (nbits + 7) // 8:
        raise ProtocolError("bad_size", f"HELD of {len(frame)} bytes for {nbits} bits")
    return HeldReply(simulation_id, request_id, rank, world, status, nbits, frame[end:])
