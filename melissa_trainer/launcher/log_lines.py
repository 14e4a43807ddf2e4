"""The last lines of a job's log, as a failure report quotes them: without the banner
hydra (MPICH's ``mpiexec``) prints when it is terminated.

A launcher that kills an ``mpiexec`` job (a refused HELLO, a hang, the study's stop)
sends it SIGTERM; hydra then writes, after whatever the solver printed::

    ===================================================================================
    =   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
    =   PID 15464 RUNNING AT vm
    =   EXIT CODE: 15
    =   CLEANING UP REMAINING PROCESSES
    =   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
    ===================================================================================
    YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Terminated (signal 15)
    This typically refers to a problem with your application.
    Please see the FAQ page for debugging suggestions

Quoted as a failed simulation's "last lines" (trial F3), it hid the solver's own, and
every such failure had the same last line. A block whose exit string is ``Terminated
(signal 15)`` (a SIGTERM: the launcher's kill, ``scancel``, a preemption; never what a
solver's own failure looks like) is left out; any other (a rank's segmentation fault,
abort or exit code) says how the solver died and is kept.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["log_lines", "tail_lines", "without_kill_banners"]

_START = "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
_EXIT = "YOUR APPLICATION TERMINATED WITH THE EXIT STRING:"
_TERMINATED = "Terminated (signal 15)"
_AFTER = (
    "This typically refers to a problem with your application.",
    "Please see the FAQ page for debugging suggestions",
)
_BLOCK = 8  # the banner's lines from its start to its exit string, at most


def _rule(line: str) -> bool:
    return len(line) > 20 and set(line.strip()) == {"="}


def without_kill_banners(lines: list[str]) -> tuple[list[str], int]:
    """`lines` (non-blank) without hydra's banners of a SIGTERM (module docstring), and
    how many banners were left out."""
    out: list[str] = []
    dropped = i = 0
    while i < len(lines):
        if lines[i].strip() == _START:
            end = next(
                (j for j in range(i + 1, min(len(lines), i + _BLOCK)) if _EXIT in lines[j]),
                None,
            )
            if end is not None and lines[end].strip().endswith(_TERMINATED):
                if out and _rule(out[-1]):
                    out.pop()  # the rule above the banner
                dropped += 1
                i = end + 1
                while i < len(lines) and lines[i].strip() in _AFTER:
                    i += 1
                continue
        out.append(lines[i])
        i += 1
    return out, dropped


def tail_lines(path: Path, tail_bytes: int) -> list[str]:
    """The non-blank lines of the last `tail_bytes` of `path`, as they are (the first
    may be cut).

    Raises:
        OSError: the log cannot be read.
    """
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - tail_bytes))
        text = f.read().decode("utf-8", "replace")
    return [line for line in text.splitlines() if line.strip()]


def log_lines(path: Path, tail_bytes: int) -> tuple[list[str], int]:
    """The non-blank lines of the last `tail_bytes` of `path` without hydra's banners of
    a SIGTERM, and how many banners were left out (`without_kill_banners`).

    Raises:
        OSError: the log cannot be read.
    """
    return without_kill_banners(tail_lines(path, tail_bytes))
