"""`protocol.decode` of DATA messages, memoized on their headers."""

from __future__ import annotations

from typing import Any

from melissa_trainer import wire as protocol
from melissa_trainer.wire import (
    AFTER_TIME_STEP_AT,
    DATA,
    DATA_HEADER_BYTES,
    DIM_BYTES,
    FLAG_INLINE,
    FLAGS_AT,
    KIND_AT,
    NAME_LEN_AT,
    NDIM_AT,
    TIME_STEP_AT,
    Data,
    Message,
)

__all__ = ["DataDecoder"]

_unpack_step = protocol.U64.unpack_from
_tuple_new = tuple.__new__


class DataDecoder:
    """`protocol.decode`, memoized for DATA headers (INLINE or with a payload frame).

    A client sends the same DATA header at every time step but for the step itself
    (`TIME_STEP_AT`), so the header's other bytes key the decoded fields: a hit costs a
    slice and a dict lookup instead of a full decode (docs/measured.md, "Design
    choices, measured").
    Only headers that `decode` accepted are memoized (their flags byte is part of the
    key, so an INLINE header and a two-frame one, or a FINITE one and one without,
    never share an entry), and the payload
    size is checked on every message: the bytes after an INLINE header, or the payload
    frame of a two-frame DATA (whose header frame must end with its header). A mismatch
    goes through `decode`, which rejects it, so what is accepted and rejected is exactly
    what `decode` accepts and rejects. The memo is bounded (cleared when full).

    Not thread-safe (the receiver's ingester).
    """

    __slots__ = ("_memo", "_max_bytes", "_limit")

    def __init__(self, max_message_bytes: int, limit: int = 4096) -> None:
        self._memo: dict[bytes, tuple[int, tuple[Any, ...], int, bool]] = {}
        self._max_bytes, self._limit = max_message_bytes, limit

    def __call__(self, frame: bytes, payload: Any = None) -> Message:
        """Decode `frame` (and `payload`, the second frame's buffer, or None) as
        ``protocol.decode(frame, payload, max_message_bytes)`` does.

        Raises:
            ProtocolError: as `protocol.decode`.
        """
        size = len(frame)
        if size < DATA_HEADER_BYTES or frame[KIND_AT] != DATA:
            return protocol.decode(frame, payload, self._max_bytes)
        end = DATA_HEADER_BYTES + DIM_BYTES * frame[NDIM_AT] + frame[NAME_LEN_AT]  # dims, name
        key = frame[:TIME_STEP_AT] + frame[AFTER_TIME_STEP_AT:end]
        hit = self._memo.get(key)
        if hit is not None:
            # The flags byte is in the key: INLINE comes without a payload frame, the
            # others with one; any other combination goes to `decode`, which rejects it.
            if frame[FLAGS_AT] & FLAG_INLINE:
                if payload is None and size - end == hit[2]:
                    step = _unpack_step(frame, TIME_STEP_AT)[0]
                    body = memoryview(frame)[end:]
                    return _tuple_new(Data, (hit[0], step, *hit[1], body, hit[3]))
            elif payload is not None and size == end and len(payload) == hit[2]:
                step = _unpack_step(frame, TIME_STEP_AT)[0]
                return _tuple_new(Data, (hit[0], step, *hit[1], payload, hit[3]))
        msg = protocol.decode(frame, payload, self._max_bytes)
        assert type(msg) is Data  # a DATA kind byte decodes to DATA or raises
        if len(self._memo) >= self._limit:
            self._memo.clear()
        # simulation id; client rank .. element count; payload bytes; FLAG_FINITE (the
        # flags byte is in the key: a flagged and an unflagged header never share an entry)
        nbytes = size - end if payload is None else len(payload)
        self._memo[key] = (msg[0], msg[2:9], nbytes, msg.finite)
        return msg
