"""A study whose simulations all fail the same way from the start: stop it early.

A solver that cannot start (a module not installed, a wrong path, a missing licence, a
library not found) fails every simulation identically, whatever its parameters. The
failure policy would restart each simulation, redraw it, and stop only when the study's
failure budget is spent: for a study of 64, about a hundred launches and the same
report many times over. `SystematicFailure` notices it after a handful:

    the first `attempts` failed attempts, of at least two simulations (two parameter
    sets), all ended with the same exit code and the same last line in their logs,
    before any simulation of the study sent any data

and the study then fails at once with one report (`LauncherTuning.systematic_failures`
sets `attempts`; None turns the check off). Once any simulation has sent data, or one
attempt failed differently, the solver demonstrably can run: the check is off for the
rest of the study, and the ordinary failure policy decides.

Used by the launcher's thread only (no lock).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["SystematicFailure", "last_log_line"]

#: bytes read from the end of a log to find its last line
_TAIL_BYTES = 4096


def last_log_line(path: Path) -> str:
    """The last non-blank line of a job's log ("" if it has none or cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - _TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class _Attempt:
    simulation_id: int
    code: int | str
    last_line: str


class SystematicFailure:
    """Watches the failed attempts of a study until it has sent data (module docstring).

    Args:
        attempts: failed attempts after which identical failures stop the study
            (>= 2), or None: never.
    """

    def __init__(self, attempts: int | None) -> None:
        self.attempts = attempts
        self._seen: list[_Attempt] = []
        self.off = attempts is None

    def data_seen(self) -> None:
        """A simulation sent data: the solver can run; the check is off from now on."""
        self.off = True
        self._seen.clear()

    def failed(self, simulation_id: int, code: int | str, log: Path) -> str | None:
        """A failed attempt ended; returns why the study should stop now (the cause, to
        head the study's report), or None."""
        if self.off:
            return None
        attempt = _Attempt(simulation_id, code, last_log_line(log))
        if self._seen and (attempt.code, attempt.last_line) != (
            self._seen[0].code,
            self._seen[0].last_line,
        ):
            self.off = True  # failures that differ: parameters, not the solver
            self._seen.clear()
            return None
        self._seen.append(attempt)
        assert self.attempts is not None
        ids = sorted({a.simulation_id for a in self._seen})
        if len(self._seen) < self.attempts or len(ids) < 2:
            return None
        line = attempt.last_line or "(an empty log)"
        return (
            f"every one of the study's first {len(self._seen)} attempts (simulations "
            f"{ids}, different parameters) failed the same way before any simulation sent "
            f"data: exit code {attempt.code}, last log line {line!r}. The solver or its "
            f"environment is at fault, not its parameters: run one simulation's command by "
            f"hand, fix it and start again (LauncherTuning.systematic_failures="
            f"{self.attempts}; None turns this check off)"
        )
