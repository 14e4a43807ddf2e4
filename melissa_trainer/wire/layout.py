"""The wire's bytes: magic, version, kinds, flags, limits, the dtype allow-list, the
header `Struct`s and the byte offsets of the fields read without a full decode.

The only home of the wire layout (`tests/stream/test_protocol_layout.py` checks that no other module
of `stream` or `client` packs or unpacks bytes by hand): the client's prebuilt headers,
the receiver's peeks at a frame's kind and flags and the inline decoder's memo key use
the `*_AT` offsets and `U64` below, never literal offsets. Standard library and numpy.
"""

from __future__ import annotations

import struct

import numpy as np

MAGIC = b"MTRN"
VERSION = 2

HELLO, DATA, BYE, ABANDON, BATCH = 1, 2, 3, 4, 5
KIND_NAMES = {HELLO: "HELLO", DATA: "DATA", BYE: "BYE", ABANDON: "ABANDON", BATCH: "BATCH"}
#: The serving channel's kinds (docs/protocol.md, section 16): on the trainer's serving
#: socket (ZeroMQ DEALER -> ROUTER), never on the stream's PULL socket (whose receiver
#: rejects them as ``bad_kind``).
PREDICT, PREDICTION, REFUSED = 6, 7, 8
#: The follow channel's kinds (docs/protocol.md, section 17): on a receiver's follow
#: socket (DEALER -> ROUTER), never on the stream's PULL socket (rejected as ``bad_kind``).
HELD_QUERY, HELD = 9, 10
#: The admission query's kinds (docs/protocol.md, section 17a): on the same follow socket.
ADMISSION_QUERY, ADMISSION = 11, 12
#: The close receipt's kinds (docs/protocol.md, section 17b): on the same follow socket.
RECEIPT_QUERY, RECEIPT = 13, 14

#: DATA flag: the payload follows the header in the same frame.
FLAG_INLINE = 0x1
#: DATA and BATCH flag: the sender checked that every value of the payload (of every
#: record, in a BATCH) is finite (no NaN, no Inf); set on floating-point fields only, and
#: only when that check passed. A fact about the payload, not a policy: a receiver may
#: skip its own check of a field whose every part carries it (`nonfinite`); a message
#: without it is checked. Bit 1, which version-2 receivers before it ignore (they check
#: as for any message): no new version (docs/protocol.md, section 13).
FLAG_FINITE = 0x2
#: ABANDON flag: the launcher redraws a replacement (receivers wait for it instead)
FLAG_REPLACED = 0x1

MAX_NDIM = 8
MAX_NAME_BYTES = 255
#: Default bound on one message (header + payload), in bytes.
DEFAULT_MAX_MESSAGE_BYTES = 1 << 30
MAX_HELLO_BYTES = 1 << 20
#: Client rank counts are u16 on the wire.
MAX_CLIENT_RANKS = (1 << 16) - 1
#: What HELLO's optional ``client`` key names: the Python client, or the C client (which
#: the Fortran bindings call); a receiver keeps another value as None (unknown).
CLIENT_KINDS = ("python", "c")
#: Longest run id (HELLO's optional ``run_id``); letters, digits, ``-`` and ``_`` only.
MAX_RUN_ID_CHARS = 64
#: Names a field may not have: the receiver adds these entries to every sample.
RESERVED_NAMES = frozenset({"simulation_id", "time_step", "parameters"})

#: dtype code on the wire -> numpy dtype (little-endian). The allow-list.
DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),
    2: np.dtype("<f8"),
    3: np.dtype("<f2"),
    4: np.dtype("<i1"),
    5: np.dtype("<i2"),
    6: np.dtype("<i4"),
    7: np.dtype("<i8"),
    8: np.dtype("<u1"),
    9: np.dtype("<u2"),
    10: np.dtype("<u4"),
    11: np.dtype("<u8"),
    12: np.dtype("?"),
}
DTYPE_CODES: dict[np.dtype, int] = {dt: code for code, dt in DTYPES.items()}
#: a HELLO's dtype strings (numpy's ``dtype.str``): exactly these, no alias ("float32")
HELLO_DTYPES: dict[str, np.dtype] = {dt.str: dt for dt in DTYPES.values()}

# magic, version, kind, flags, simulation id
PREFIX = struct.Struct("<4sBBHQ")
# time step, client rank, client count, dtype code, ndim, name length, reserved, offset, count
DATA_FIXED = struct.Struct("<QHHBBBBQQ")
DATA_HEADER_BYTES = PREFIX.size + DATA_FIXED.size  # 48; then ndim x u64 shape, then name
# client rank, client count, JSON length
HELLO_FIXED = struct.Struct("<HHI")
# client rank, client count, steps sent
BYE_FIXED = struct.Struct("<HHQ")
# request id, timeout in ms (0: none), array count, run id length
PREDICT_FIXED = struct.Struct("<QIBB")
# request id, model version (the global step), array count, reserved
PREDICTION_FIXED = struct.Struct("<QQBB")
# request id, model version, reason code, reserved, retry after (ms), detail length
REFUSED_FIXED = struct.Struct("<QQBBIH")
# request id, rank, world size, status, reserved (u8, u16), bit count (HELD)
HELD_FIXED = struct.Struct("<QIIBBHQ")
# request id, rank, world size, status, reserved (u8), reason length (ADMISSION)
ADMISSION_FIXED = struct.Struct("<QIIBBH")
# request id, the BYE's steps sent, client rank, client count, run id length, reserved
# (RECEIPT_QUERY)
RECEIPT_QUERY_FIXED = struct.Struct("<QQHHBB")
# request id, rank, world size, admission status, BYE status, reason length, steps held,
# the BYE's steps sent, samples refused as non-finite (RECEIPT)
RECEIPT_FIXED = struct.Struct("<QIIBBHQQQ")
# one array of a PREDICT or PREDICTION: dtype code, ndim, name length, reserved; then
# ndim x u64 dims (`DIMS`), then the name
ARRAY_FIXED = struct.Struct("<BBBB")
#: The most arrays one PREDICT or PREDICTION carries (u8 count).
MAX_PREDICT_ARRAYS = 255
#: ``DIMS[n]``: the n u64 dimensions of a DATA or BATCH header (after its fixed part)
DIMS = [struct.Struct(f"<{n}Q") for n in range(MAX_NDIM + 1)]
#: A u64: DATA's time step, BATCH's record count (in the same slot), each BATCH
#: record's leading time step. Use its bound methods (`U64.pack`) on hot paths.
U64 = struct.Struct("<Q")

# Byte offsets of the header fields read without a full `decode` (hot paths peek at
# one byte or slice around the time step); the tests check them against the Structs.
#: The message kind (u8).
KIND_AT = struct.calcsize("<4sB")
#: The flags (u16; FLAG_INLINE is in its low byte, read as ``frame[FLAGS_AT]``).
FLAGS_AT = struct.calcsize("<4sBB")
#: The simulation id (u64), in every message.
SIMULATION_ID_AT = struct.calcsize("<4sBBH")
#: DATA's time step (u64), where BATCH has its record count (`RECORDS_AT`).
TIME_STEP_AT = PREFIX.size
RECORDS_AT = TIME_STEP_AT
#: The first byte after the time step of DATA and BATCH (the client rank).
AFTER_TIME_STEP_AT = TIME_STEP_AT + U64.size
#: The number of dimensions (u8) of DATA and BATCH; ndim x u64 dims follow the fixed part.
NDIM_AT = PREFIX.size + struct.calcsize("<QHHB")
#: The field name's length in bytes (u8) of DATA and BATCH; the name follows the dims.
NAME_LEN_AT = NDIM_AT + 1
#: Bytes per dimension in a DATA or BATCH header.
DIM_BYTES = U64.size
#: Every u64 on the wire (ids, time steps, dimensions) is below this.
U64_LIMIT = 1 << 64
