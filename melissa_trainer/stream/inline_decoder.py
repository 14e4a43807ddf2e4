"""`protocol.decode` of one-frame messages, memoized for INLINE DATA headers."""

from __future__ import annotations

import struct
from typing import Any

from melissa_trainer.stream import protocol
from melissa_trainer.stream.protocol import DATA, FLAG_INLINE, Data, Message

__all__ = ["InlineDecoder"]

_STEP = struct.Struct("<Q")
_tuple_new = tuple.__new__


class InlineDecoder:
    """`protocol.decode` of one-frame messages, memoized for INLINE DATA headers.

    A client sends the same DATA header at every time step but for the step itself
    (bytes 16-23), so the header's other bytes key the decoded fields: a hit costs a
    slice and a dict lookup instead of a full decode (about 2 us less per message).
    Only headers that `decode` accepted are memoized, and the payload size is checked
    on every message (a mismatch goes through `decode`, which rejects it), so what is
    accepted and rejected is exactly what `decode` accepts and rejects. The memo is
    bounded (cleared when full).
    """

    __slots__ = ("_memo", "_max_bytes", "_limit")

    def __init__(self, max_message_bytes: int, limit: int = 4096) -> None:
        self._memo: dict[bytes, tuple[int, tuple[Any, ...], int]] = {}
        self._max_bytes, self._limit = max_message_bytes, limit

    def __call__(self, frame: bytes) -> Message:
        size = len(frame)
        if size < protocol.DATA_HEADER_BYTES or frame[5] != DATA or not frame[6] & FLAG_INLINE:
            return protocol.decode(frame, None, self._max_bytes)
        end = protocol.DATA_HEADER_BYTES + 8 * frame[29] + frame[30]  # + ndim x 8 + name
        key = frame[:16] + frame[24:end]
        hit = self._memo.get(key)
        if hit is not None and size - end == hit[2]:
            step = _STEP.unpack_from(frame, 16)[0]
            fields = (hit[0], step, *hit[1], memoryview(frame)[end:])
            return _tuple_new(Data, fields)
        msg = protocol.decode(frame, None, self._max_bytes)
        assert type(msg) is Data  # a DATA kind byte decodes to DATA or raises
        if len(self._memo) >= self._limit:
            self._memo.clear()
        # simulation id; client rank .. element count; payload bytes
        self._memo[key] = (msg[0], msg[2:9], size - end)
        return msg
