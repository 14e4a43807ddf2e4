"""Recycling the memory of received frames in the training process (glibc malloc).

A payload of more than 64 KiB stays in the ZeroMQ frame it arrived in, allocated by
ZeroMQ's I/O thread and freed when the buffer drops the sample. With glibc's default
settings, blocks of that size are mapped and unmapped one at a time, or trimmed off
the heap as soon as they are freed: each new frame then takes a page fault per 4 KiB
and each free a TLB shootdown that interrupts the training thread too. Training on a
stream of 1 MiB fields at 200 MB/s measured 0.83-0.86x the steps/s of the same
training without ingest this way, and 0.95-0.97x with both thresholds raised (through
glibc's MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ environment variables; 2 runs
each, medians of 5 interleaved rounds of `benchmarks/ingest.py`'s training workload;
raising only one of them gave 0.82 and 0.88).

`keep_freed_memory` sets them: blocks up to `MMAP_THRESHOLD` come from malloc's heap,
and freed memory goes back to the system only beyond `TRIM_THRESHOLD` at the heap's
top. It is process-wide and lasts: every allocation of the process (the model's host
memory, the user's arrays) is served this way from then on, and the process keeps the
memory of its largest burst (for the frames, bounded by the buffer's capacity and the
socket's high-water mark) instead of returning it. That is why it is opt-in:
`StreamSource(keep_freed_memory=True)` sets it at `start`; by default malloc is left as
it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys
import threading

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

logger = logging.getLogger(__name__)

#: Blocks up to this many bytes come from malloc's heap (glibc accepts up to 32 MiB).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap is returned to the system beyond this many bytes.
TRIM_THRESHOLD = 1 << 30

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_lock = threading.Lock()
_applied: bool | None = None  # None: not tried yet


def keep_freed_memory() -> bool:
    """Set glibc malloc's thresholds as the module docstring says, once per process.

    Returns True if they are set (now or by an earlier call), False where malloc is not
    glibc's (macOS, musl, Windows) or refused. Thread-safe; idempotent.
    """
    global _applied
    with _lock:
        if _applied is None:
            _applied = _mallopt()
        return _applied


def _mallopt() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it (musl has mallopt too)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not ok:  # pragma: no cover - glibc accepts both values
        logger.warning("glibc refused the malloc thresholds; frames are not recycled")
    return ok
