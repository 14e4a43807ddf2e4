"""What one client rank sends of a declared field, and the header bytes it sends it with."""

from __future__ import annotations

from melissa_trainer import wire as protocol
from melissa_trainer.client.finite_check import checked_dtype
from melissa_trainer.wire import FieldSpec

__all__ = ["INLINE_MAX_BYTES", "FieldPart", "c_strides"]

#: Payloads up to this many bytes go in one frame after the header; larger ones in a
#: second frame, without a copy.
INLINE_MAX_BYTES = 65536


class FieldPart:
    """A declared field and what this rank sends of it: its element range, whether it
    goes INLINE, and its DATA and BATCH header bytes around the time step (computed
    once, at `place`, so that a send only joins them). A float field (`checked`) is
    checked before it is sent, and goes with `head_finite` (FLAG_FINITE set) if it
    passed (`finite_check`)."""

    __slots__ = (
        "spec",
        "code",
        "name_bytes",
        "local_size",
        "offset",
        "inline",
        "head",
        "head_finite",
        "tail",
        "checked",
        "batch_head",
        "c_strides",
        "nbytes",
    )

    def __init__(self, spec: FieldSpec) -> None:
        self.spec = spec
        self.code = protocol.DTYPE_CODES[spec.dtype]
        self.name_bytes = spec.name.encode()
        self.local_size = -1  # elements this rank sends; -1 until placed
        self.offset = 0
        self.inline = True
        self.head = b""  # header bytes before the time step
        self.head_finite = b""  # the same with FLAG_FINITE set
        self.tail = b""  # header bytes after it
        self.checked = checked_dtype(spec.dtype)  # checked for NaN and Inf, then flagged
        self.batch_head = b""  # the BATCH header (record count patched when sent)
        self.c_strides = c_strides(spec.shape, spec.dtype.itemsize)
        self.nbytes = 0

    def place(self, simulation_id: int, rank: int, ranks: int, offset: int, size: int) -> None:
        self.offset, self.local_size = offset, size
        self.nbytes = size * self.spec.dtype.itemsize  # of this rank's part
        self.inline = self.nbytes <= INLINE_MAX_BYTES
        if size == 0:  # nothing of this field on this rank: it sends no DATA for it
            return
        header = protocol.encode_data_header(
            simulation_id,
            0,
            rank,
            ranks,
            self.name_bytes,
            self.code,
            self.spec.shape,
            offset,
            size,
            self.inline,
        )
        self.head, self.tail = protocol.split_at_time_step(header)
        self.head_finite = protocol.with_finite_flag(self.head)
        self.batch_head = protocol.batch_header_of(header)  # record count patched on send


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of `shape` (what numpy gives a new array)."""
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))
