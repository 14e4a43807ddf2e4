"""Recycling the memory of received frames in the training process (glibc malloc).

A payload of more than 64 KiB stays in the ZeroMQ frame it arrived in, allocated by
ZeroMQ's I/O thread and freed when the buffer drops the sample. With glibc's default
settings, blocks of that size are mapped and unmapped one at a time, or trimmed off
the heap as soon as they are freed: each new frame then takes a page fault per 4 KiB
and each free a TLB shootdown that interrupts the training thread too. Raising both
thresholds (glibc's MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_) won back most
of the steps a stream of large fields cost training; raising only one did not (figures:
docs/measured.md, "Design choices, measured").

`keep_freed_memory` sets them: blocks up to `MMAP_THRESHOLD` come from malloc's heap,
and freed memory goes back to the system only beyond `TRIM_THRESHOLD` at the heap's
top. It is process-wide and lasts: every allocation of the process (the model's host
memory, the user's arrays) is served this way from then on, and the process keeps the
memory of its largest burst (for the frames, bounded by the buffer's capacity and the
socket's high-water mark) instead of returning it. That is why it is opt-in:
`StreamSource(keep_freed_memory=True)` sets it at `start`.

`recycle_frames` is the bounded form a receiver applies by default (issue 42), once a
simulation declares a field that travels as a frame of its own (above
`FRAME_MIN_BYTES`): blocks up to `MMAP_THRESHOLD` come from the heap, and freed memory
goes back to the system beyond what that stream's frames may hold at once (the buffer's
capacity and the socket's queue, in samples), or twice `MMAP_THRESHOLD` if more (at
most `TRIM_THRESHOLD`). Those are the highest values glibc's own dynamic thresholds
reach (the mmap threshold rises to each mapped block freed, up to 32 MiB, the trim
threshold to twice it), so no block glibc would serve from its heap is mapped instead.
A fixed mmap threshold of twice the frame (as until 2026-12-01) was lower than where
glibc had settled in a training process, whose tensors are larger than a frame: each of
them was mapped and faulted in again at every step, a cost to training with no message
received (`benchmarks/field_surrogate.py --rounds 1`, whose baseline runs before the
first stream; tests/stream/test_heap.py shows the faults). Without it,
1 MiB frames held in a buffer of 64 and freed by the reader left glibc trimming the top
of ZeroMQ's I/O thread's heap at each burst of frees (`madvise`, a TLB shootdown) and
faulting every page in again on the next frames (5 to 70 faults per 1 MiB message, run
to run: why `benchmarks/ingest.py`'s 1 MB row read 0.49 one day and 0.69 the next).
A stream of small fields (batched, copied out of their frames) leaves malloc as it is;
`ReceiverConfig(recycle_frames=False)` leaves it as it is for any stream.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import threading
from typing import Any

__all__ = [
    "FRAME_MIN_BYTES",
    "MMAP_THRESHOLD",
    "TRIM_THRESHOLD",
    "keep_freed_memory",
    "recycle_frames",
]

logger = logging.getLogger(__name__)

#: Blocks up to this many bytes come from malloc's heap (glibc accepts up to 32 MiB,
#: the ceiling of its own dynamic threshold).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap is returned to the system beyond this many bytes.
TRIM_THRESHOLD = 1 << 30
#: Fields above this many bytes travel as frames of their own (the clients'
#: `INLINE_MAX_BYTES`: smaller ones are batched and copied out of their frames).
FRAME_MIN_BYTES = 1 << 16

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_lock = threading.Lock()
_applied: bool | None = None  # None: not tried yet
_mallopt_fn: Any = None  # libc's mallopt, once found (False: not glibc)
_set = (0, 0)  # the (mmap, trim) thresholds set so far (0: glibc's dynamic ones)


def keep_freed_memory() -> bool:
    """Set glibc malloc's thresholds as the module docstring says, once per process.

    Returns True if they are set (now or by an earlier call), False where malloc is not
    glibc's (macOS, musl, Windows) or refused. Thread-safe; idempotent.
    """
    global _applied
    with _lock:
        if _applied is None:
            _applied = _raise_thresholds(MMAP_THRESHOLD, TRIM_THRESHOLD)
        return _applied


def recycle_frames(frame_bytes: int, peak_bytes: int) -> bool:
    """Let malloc recycle received frames of up to `frame_bytes` each, keeping up to
    `peak_bytes` of them freed, or twice `MMAP_THRESHOLD` if more (module docstring);
    thresholds only ever rise (an earlier `keep_freed_memory` or larger call stands).
    Nothing for frames of `FRAME_MIN_BYTES` or less.

    Returns True if the thresholds now cover such frames, False where malloc is not
    glibc's or refused, or frames are larger than glibc will take from its heap
    (`MMAP_THRESHOLD`: each is then mapped, as before). Thread-safe.
    """
    if frame_bytes <= FRAME_MIN_BYTES:
        return True
    # glibc's dynamic ceilings, not twice the frame: setting a threshold turns the dynamic
    # ones off, and the process's own larger blocks must stay on the heap (docstring)
    mmap = MMAP_THRESHOLD
    trim = min(max(peak_bytes, 2 * mmap), TRIM_THRESHOLD)
    with _lock:
        return _raise_thresholds(mmap, trim) and frame_bytes < MMAP_THRESHOLD


def _raise_thresholds(mmap: int, trim: int) -> bool:
    """Raise the thresholds to at least (`mmap`, `trim`) (holding `_lock`); False where
    malloc is not glibc's or refused."""
    global _set
    mallopt = _libc_mallopt()
    if mallopt is None:
        return False
    want = (max(_set[0], mmap), max(_set[1], trim))
    if want == _set:
        return True
    # Both at once: setting either one turns glibc's dynamic thresholds off for both.
    ok = bool(mallopt(_M_MMAP_THRESHOLD, want[0])) and bool(mallopt(_M_TRIM_THRESHOLD, want[1]))
    if not ok:  # pragma: no cover - glibc accepts both values
        logger.warning("glibc refused the malloc thresholds; frames are not recycled")
        return False
    _set = want
    return True


def _libc_mallopt() -> Any:
    """glibc's mallopt, or None (not Linux, not glibc)."""
    global _mallopt_fn
    if _mallopt_fn is None:
        _mallopt_fn = _find_mallopt() or False
    return _mallopt_fn or None


def _find_mallopt() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    # The process's own symbols (dlopen(NULL): the C library Python runs on), not
    # `ctypes.util.find_library`, which starts ``ldconfig -p`` (or a compiler) to look.
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (musl has mallopt too)
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt
