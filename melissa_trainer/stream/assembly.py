"""Per-simulation bookkeeping of the receiver: the dedup record and sample reassembly.

Everything here is used by one receiver thread only (no locking inside; the receiver
holds its own lock around what a checkpoint reads).

* :class:`StepLedger` (in `step_ledger`): one receiver's ledger of one simulation's
  time steps, what it declared and which of them it has completed.
* :class:`Assembly`: one sample in progress, i.e. a time step of which some field parts
  (client ranks' element ranges) have arrived. Each field is preallocated once and
  every part is copied into it once; a part already received from the same client rank
  is a duplicate (a restarted simulation re-sending), a part overlapping another
  rank's range is rejected, so a re-send never corrupts a sample in progress. It
  notes the fields of which a part came without FLAG_FINITE (`unflagged`): only those
  are checked for NaN and Inf when the sample is complete (`nonfinite`).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from melissa_trainer.buffers import SampleBlock
from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.wire import RESERVED_NAMES, Data, Hello

#: Reasons a message is rejected (protocol's, then the receiver's own), a fixed set so
#: telemetry has the same keys on every rank. Unknown protocol reasons count as "other".
REJECT_REASONS: tuple[str, ...] = (
    # from protocol.decode: the message alone breaks the protocol
    "truncated",
    "bad_magic",
    "bad_version",
    "bad_kind",
    "unexpected_frame",
    "missing_frame",
    "bad_size",
    "bad_rank",
    "bad_dtype",
    "bad_shape",
    "too_large",
    "bad_range",
    "bad_name",
    "bad_hello",
    # from the receiver: the message disagrees with its simulation's HELLO or routing
    "no_hello",  # DATA/BYE of a simulation whose HELLO has not arrived
    "hello_mismatch",  # a second HELLO declaring other fields/parameters/rank count
    "bad_field",  # field not declared, or dtype / global shape differ from the HELLO
    "bad_client_count",  # client rank count differs from the HELLO's
    "wrong_receiver",  # a time step its simulation's routing gives another rank
    "bad_step",  # time step >= max_time_step
    "overlap",  # element range overlapping another client rank's part
    "schema_mismatch",  # a HELLO whose fields differ from the study's (see Ingest.schema)
    "wrong_run",  # a HELLO of another run (its run_id is not this receiver's)
    "other",
)

# outcomes of Assembly.add
ADDED, COMPLETE, DUPLICATE, OVERLAP = 0, 1, 2, 3


def payload_array(msg: Data, inline: bool) -> np.ndarray:
    """The array of a DATA message carrying a whole field.

    A separate payload frame becomes the sample's memory (no copy: the array's base
    keeps the ZeroMQ frame alive); it is copied only if misaligned for its dtype. An
    INLINE payload is copied out of the received bytes (into a bytearray: the
    cheapest copy, docs/measured.md, "Design choices, measured"): the array is then aligned and
    writable (a view of the bytes would be read-only, which torch warns about, and
    misaligned after the header), and the header is freed with the bytes object.
    """
    if inline:
        arr = np.frombuffer(bytearray(msg.payload), msg.dtype)
    else:
        arr = np.frombuffer(msg.payload, msg.dtype)
        if not arr.flags.aligned:
            arr = arr.copy()
    return arr if len(msg.shape) == 1 else arr.reshape(msg.shape)


def check_hello(hello: Hello, max_field_bytes: int) -> str | None:
    """The reject reason of a HELLO the receiver cannot accept, else None."""
    if not all(math.isfinite(v) for v in hello.parameters.values()):
        return "bad_hello"  # NaN would never compare equal to a re-sent HELLO's
    for spec in hello.fields:
        if spec.name in RESERVED_NAMES:
            return "bad_hello"
        if spec.size * spec.dtype.itemsize > max_field_bytes:
            return "too_large"
    return None


class _FieldParts:
    """The parts of one field received so far: client ranks and sorted element ranges."""

    __slots__ = ("ranks", "starts", "ends", "covered")

    def __init__(self) -> None:
        self.ranks: set[int] = set()
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.covered = 0


class Assembly:
    """A sample in progress: fields being filled from client ranks' parts.

    Memory: each field array is allocated when its first part arrives (a whole-field
    part is kept as is, without a copy); `nbytes` is the full sample's size, reserved
    up front for the receiver's pending-bytes bound.
    """

    __slots__ = ("record", "arrays", "parts", "remaining", "nbytes", "unflagged")

    def __init__(self, record: StepLedger) -> None:
        self.record = record
        self.arrays: dict[str, np.ndarray] = {}
        self.parts: dict[str, _FieldParts] = {}
        self.remaining = len(record.fields)
        self.nbytes = record.sample_nbytes
        #: the fields of which a part came without FLAG_FINITE: the receiver checks
        #: these (a field whose every part carried the flag was checked by its senders)
        self.unflagged: set[str] = set()

    def add(self, msg: Data, size: int, inline: bool) -> int:
        """Add one part; returns ADDED, COMPLETE (all fields done), DUPLICATE or OVERLAP."""
        parts = self.parts.get(msg.name)
        if parts is None:
            parts = self.parts[msg.name] = _FieldParts()
        elif msg.client_rank in parts.ranks:
            return DUPLICATE
        start, end = msg.offset, msg.offset + msg.elements
        j = bisect.bisect_right(parts.starts, start)
        if (j and parts.ends[j - 1] > start) or (j < len(parts.starts) and parts.starts[j] < end):
            return OVERLAP
        if end - start == size:  # the whole field in one part: keep its memory
            self.arrays[msg.name] = payload_array(msg, inline)
        else:
            arr = self.arrays.get(msg.name)
            if arr is None:
                arr = self.arrays[msg.name] = np.empty(msg.shape, msg.dtype)
            arr.reshape(-1)[start:end] = np.frombuffer(msg.payload, msg.dtype)
        if not msg.finite:
            self.unflagged.add(msg.name)
        parts.ranks.add(msg.client_rank)
        parts.starts.insert(j, start)
        parts.ends.insert(j, end)
        parts.covered += end - start
        if parts.covered == size:
            self.remaining -= 1
            if not self.remaining:
                return COMPLETE
        return ADDED


def block_of(name: str, rows: np.ndarray, sim: StepLedger, steps: np.ndarray) -> SampleBlock:
    """The samples of `rows` (the field, one row per step of `steps`) as one block.

    `steps`: the time steps, int64, an array the block may keep (not a view of a frame).
    The field is copied once for the whole block (a sample owns its memory: a view
    would pin the whole received frame while the sample stays in the buffer), and
    `simulation_id`, `time_step` and `parameters` are one array each: four arrays for
    the block instead of a dict and four arrays per sample. A FIFO buffer holds the
    block as it is; other policies hold its samples (see `SampleBlock.samples`).
    """
    n = len(steps)
    ids = np.empty(n, np.int64)
    ids.fill(sim.id_array)  # (np.full's Python wrapper costs more than the fill)
    return SampleBlock(
        {
            name: rows.copy(),
            "simulation_id": ids,
            "time_step": steps,
            "parameters": np.repeat(sim.param_array[None], n, axis=0),
        }
    )
