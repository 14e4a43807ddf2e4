"""What the launcher is told and what it tells: the receivers' `DataReport` (which
simulations' data is complete, which HELLOs were refused), and a failed study's
`LauncherError`, whose message quotes the failed simulations' logs (`log_tail`).

Shared by `supervisor`, `worker_mode` and `launcher`; imports nothing of theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

__all__ = ["LOG_TAIL_LINES", "DataReport", "LauncherError", "log_tail"]

#: log lines of a failed simulation quoted in the study's error
LOG_TAIL_LINES = 5
#: bytes read from the end of a log for its tail (a few long lines fit; never the whole log)
_TAIL_BYTES = 8192


class DataReport(Protocol):
    """What the receivers tell the study (in a trainer: rank 0's receiver).

    Called from the launcher's thread; the implementation must be thread-safe.
    """

    def completed(self, start: int = 0) -> Sequence[int]:
        """Ids whose every step reached the buffer, in completion order, from the
        `start`-th on (the list only grows)."""

    def refused(self, start: int = 0) -> Sequence[tuple[int, str]]:
        """(id, why) of each refused HELLO, in order, from the `start`-th on (the list
        only grows)."""

    def idle_seconds(self) -> float:
        """Seconds since a message last arrived, counted only while the socket is
        found empty (0 while messages flow or the receiver waits for buffer room)."""

    def backpressured(self) -> bool:
        """True while the receiver waits for room in the buffer (the trainer is not
        reading: the simulations' silence is not theirs)."""

    def describe(self, simulation_id: int) -> str:
        """What the receiver has of a simulation, for error messages."""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a job's log, indented, or a note if there is none."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - _TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"    (no log: {exc.strerror})"
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(f"    | {line}" for line in tail) if tail else "    (empty log)"


class LauncherError(RuntimeError):
    """The study failed: a simulation failed for good with ``on_failure="raise"`` (or its
    redraws ran out), a job could not be started, or the launcher's thread died."""
