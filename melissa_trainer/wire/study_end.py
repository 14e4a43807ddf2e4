"""STUDY_END: rank 0's word to every receiver that the study has ended, and which
simulations ended with exit 0 (docs/protocol.md, section 8b).

Sent once, on a receiver's stream socket (PUSH -> PULL, as ABANDON), when no job is alive,
nothing is left to start, and every simulation has finished or been given up or rank 0's
receiver is held back by its buffer (`melissa_trainer.study.end_notice`).
One frame: the 16-byte prefix, whose simulation-id field holds the number ``n`` of ids
that follow, and ``n`` little-endian u64 simulation ids, strictly increasing. A receiver
then knows which data it will never get: what it lacks of those is an error it names
(`melissa_trainer.stream.study_end`), instead of a silent wait for its stall timeout.
Flags: none defined (ignored, as ABANDON's unknown ones). Standard library and numpy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from melissa_trainer.wire.layout import MAGIC, PREFIX, VERSION
from melissa_trainer.wire.messages import ProtocolError, StudyEnd

__all__ = ["STUDY_END", "decode_study_end", "encode_study_end"]

#: the kind byte: on the stream's PULL socket only (the kinds 6-14 are other sockets')
STUDY_END = 15
_ID = np.dtype("<u8")


def encode_study_end(finished: Iterable[int]) -> bytes:
    """The STUDY_END frame of the `finished` ids (any order, duplicates dropped).

    Raises:
        ValueError: an id is negative or past 2**63 - 1.
    """
    ids = np.unique(np.fromiter((int(s) for s in finished), dtype=np.int64))
    if ids.size and ids[0] < 0:
        raise ValueError(f"a simulation id is >= 0, not {int(ids[0])}")
    return PREFIX.pack(MAGIC, VERSION, STUDY_END, 0, ids.size) + ids.astype(_ID).tobytes()


def decode_study_end(frame: Any, size: int, count: int, max_message_bytes: int) -> StudyEnd:
    """Validate a STUDY_END frame of `size` bytes whose prefix says `count` ids
    (`decode` has checked the magic, version and kind).

    Raises:
        ProtocolError: ``too_large`` (more ids than `max_message_bytes` holds),
            ``bad_size`` (the frame is not the prefix and `count` ids), ``bad_range``
            (the ids are not strictly increasing, or one is past 2**63 - 1).
    """
    if count > (max_message_bytes - PREFIX.size) // _ID.itemsize:
        raise ProtocolError("too_large", f"STUDY_END of {count} ids")
    if size != PREFIX.size + count * _ID.itemsize:
        raise ProtocolError("bad_size", f"STUDY_END of {size} bytes for {count} ids")
    ids = np.frombuffer(frame, dtype=_ID, count=count, offset=PREFIX.size)
    if count and int(ids.max()) > np.iinfo(np.int64).max:
        raise ProtocolError("bad_range", "STUDY_END names an id past 2**63 - 1")
    signed = ids.astype(np.int64)  # (a copy: the frame's memory is not kept)
    if count > 1 and not bool(np.all(signed[1:] > signed[:-1])):
        raise ProtocolError("bad_range", "STUDY_END ids are not strictly increasing")
    return StudyEnd(signed)
