"""A study whose simulations all fail the same way from the start: stop it early.

A solver that cannot start (a module not installed, a wrong path, a missing licence, a
library not found) fails every simulation identically, whatever its parameters. The
failure policy would restart each simulation, redraw it, and stop only when the study's
failure budget is spent: for a study of 64, about a hundred launches and the same
report many times over. `SystematicFailure` notices it after a handful:

    the first `attempts` failed attempts, of at least two simulations (two parameter
    sets), all ended with the same exit code and the same failure line in their logs
    (`failure_line`, compared as `same_failure` does), before any simulation of the
    study sent any data

and the study then fails at once with one report (`LauncherTuning.systematic_failures`
sets `attempts`; None turns the check off). The report blames what is at fault:

* a parameter name the solver and the sampler disagree on, when the last line is a
  ``KeyError`` for a name the sampler does not draw (a typo in the solver, or a
  parameter the study's bounds lack): the report names the key, the sampler's
  parameters and the fix on either side (`missing_parameter`);
* the solver's fields, when every attempt was refused by the receiver (its HELLO
  declared fields other than the study's): the report quotes the receiver's reason
  (``field 'u' is float32 (47, 48) where the study's is float32 (48, 48)``), not the
  log of a process that was killed before it wrote anything;
* a hang or a slow start-up, when every attempt was killed for its silence (code
  ``"timeout"``, typically before its first message): the report names the bound that
  killed the last of them and its fix (`timeout_rule`, `SilenceClock.bound`'s rule: a
  numeric `simulation_timeout` bounds a start-up too while `startup_timeout` is unset)
  beside running the command by hand;
* otherwise the solver or its environment. Once any simulation has sent data, or one
attempt failed differently, the solver demonstrably can run: the check is off for the
rest of the study, and the ordinary failure policy decides.

The failure line is the log's last line that is not an MPI launcher's banner of an abort
or a kill (`failure_line`): MPICH's ``Abort(4) on node 1 (rank 1 in comm 0): application
called MPI_Abort(MPI_COMM_WORLD, 4) - process 1`` follows the line where the solver said
why (the C client's error, as the solver printed it, or the client's own
``melissa_trainer: ...``), which is the one to quote; a trial's report quoted the banner.
gfortran's lines after an ``error stop`` (``ERROR STOP 8``, ``Error termination.
Backtrace:`` and its frames) are passed over alike: a trial's report quoted ``#10
0xffffffffffffffff in ???``. Lines are compared with their rank, node, process, pid, task
numbers, the C client's simulation id, durations and clock times masked
(`failure_key`): an MPI solver fails on whichever rank hits the error first, and the
same failure said by rank 0 or rank 1 stopped the study after 6 attempts instead of 4;
the C client's messages name the simulation and how long it tried.

Used by the launcher's thread only (no lock).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.exit_cause import code_text
from melissa_trainer.launcher.log_lines import log_lines

__all__ = [
    "SystematicFailure",
    "failure_key",
    "failure_line",
    "spanned",
    "runtime_line",
    "last_log_line",
    "missing_parameter",
]

#: bytes read from the end of a log to find its last line
_TAIL_BYTES = 4096


def last_log_line(path: Path) -> str:
    """The last non-blank line of a job's log ("" if it has none or cannot be read),
    hydra's banner of a SIGTERM and Slurm's lines of a kill left out (`log_lines`:
    every killed mpiexec or Slurm job's log would end with the same line)."""
    try:
        lines, _ = log_lines(path, _TAIL_BYTES)
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


#: an MPI launcher's lines about an abort, not the solver's reason (MPICH's MPI_Abort
#: banner, Open MPI's); srun's and slurmstepd's lines of a kill are not read at all
#: (`log_lines.SLURM_END`, the one rule: not the solver's lines either)
_BANNER = re.compile(r"application called MPI_Abort\(|MPI_ABORT was invoked on rank")
#: the Fortran runtime's lines after an ``error stop`` or a crash (gfortran's "ERROR STOP
#: 8", "Error termination. Backtrace:", its frames "#3  0x7f.. in ???" and "at file:58"):
#: a trial's report quoted "#10  0xffffffffffffffff in ???" as the failure, not the
#: client's line above them (an ``error stop`` with a message, "ERROR STOP mesh not
#: found", is the solver's reason and is kept)
_BACKTRACE = re.compile(
    r"^(?:ERROR STOP -?\d+|Error termination\. Backtrace:|#\d+\s+0x[0-9a-fA-F]+ in .*|at \S+:\d+)$"
)
#: the numbers that differ between the ranks or the attempts of one failure
_NUMBERED = re.compile(
    r"\b(rank|node|process|pid|task|tasks|proc|StepId|STEP|job"
    r"|MELISSA_TRAINER_SIMULATION_ID)(\s*[=:#]?\s*)\d+(?:\.\d+)?",
    re.IGNORECASE,
)
#: the C client's prefix of its messages ("mt_close: simulation 3 rank 1: ..."): only
#: there is a simulation's id masked, a solver's own "diverged in simulation 3" being a
#: failure of its parameters
_CLIENT_PREFIX = re.compile(r"\bsimulation \d+ (?=rank N\b)")
#: how long a client waited or tried, and a clock time: they differ between attempts of
#: one failure ("tried for 69 s" then "tried for 70 s", in the C client's close)
_TIMED = re.compile(r"\b\d+(?:\.\d+)? s\b|\b\d\d:\d\d:\d\d\b")


def runtime_line(line: str) -> str:
    """What `line` is when a runtime printed it after the solver's reason: "the MPI
    launcher's abort banner" or "the Fortran runtime's backtrace" (its error stop and
    frames); "" for any other line (the solver's, the client's)."""
    said = line.strip()
    if _BANNER.search(said):
        return "the MPI launcher's abort banner"
    if _BACKTRACE.match(said):
        return "the Fortran runtime's backtrace"
    return ""


def failure_line(path: Path) -> tuple[str, str]:
    """The line of a job's log that says why it failed: the last non-blank one that is
    not a runtime's line after the reason (`runtime_line`: an MPI launcher's banner of an
    abort, the Fortran runtime's error-stop and backtrace lines; module docstring;
    Slurm's lines of a kill are not read, `log_lines`), or the last one if every line
    is; "" if the log has none or cannot be read. With it, what was passed over after it
    (`runtime_line`'s words, two kinds joined by "and"), or "" when it is the log's last
    line."""
    try:
        lines, _ = log_lines(path, _TAIL_BYTES)
    except OSError:
        return "", ""
    said = [line.strip() for line in lines if line.strip()]
    for i in range(len(said) - 1, -1, -1):
        if not runtime_line(said[i]):
            kinds = {runtime_line(line) for line in said[i + 1 :]}
            return said[i], " and ".join(sorted(kinds))
    return (said[-1] if said else ""), ""


def failure_key(line: str) -> str:
    """`line` with its rank, node, process, pid, task and step numbers masked (``rank
    N``), the simulation's id in the C client's prefix (``simulation N rank N:``), and its
    durations and clock times (``N s``, ``HH:MM:SS``): two attempts whose failure lines
    have the same key failed the same way."""
    line = _CLIENT_PREFIX.sub("simulation N ", _NUMBERED.sub(lambda m: f"{m[1]}{m[2]}N", line))
    return _TIMED.sub(lambda m: "HH:MM:SS" if ":" in m[0] else "N s", line)


def spanned(lines: Sequence[str]) -> str:
    """The first of `lines` (failure lines of one `failure_key`) with each of its
    durations and clock times that differ between the lines replaced by their range
    (``after 3.2-4.1 s``, ``at 10:00:01-10:00:09``; clock times over midnight as
    ``23:59:58-00:00:02``, `_clock_range`): the key groups them, and quoting the first
    alone said one attempt's figure for all. The first line as it is when the figures
    agree (or the lines do not share a key)."""
    first = lines[0]
    figures = [[m[0] for m in _TIMED.finditer(line)] for line in lines]
    if any(len(f) != len(figures[0]) for f in figures):
        return first
    for i, match in reversed(list(enumerate(_TIMED.finditer(first)))):
        said = [f[i] for f in figures]
        if ":" in said[0]:  # (a clock time: on the day's circle)
            (low, high), unit = _clock_range(said), ""
        else:  # (a duration, "3.2 s": by its number, each said as it was)
            numbers = [d.split()[0] for d in said]
            low, high, unit = min(numbers, key=float), max(numbers, key=float), " s"
        if low != high:
            first = f"{first[: match.start()]}{low}-{high}{unit}{first[match.end() :]}"
    return first


_DAY = 24 * 3600


def _clock_range(times: list[str]) -> tuple[str, str]:
    """The first and last of clock times `times` (``HH:MM:SS``, each said as it was) on
    the day's circle: the shortest span holding them all, which starts after the widest
    gap between two of them. Found in review (hrev9, 2026-12-07): sorted as text, times
    on both sides of midnight said ``00:00:01-23:59:59``, a whole day, for two seconds."""

    def seconds(t: str) -> int:
        h, m, s = (int(x) for x in t.split(":"))
        return (h * 3600 + m * 60 + s) % _DAY

    ordered = sorted(set(times), key=seconds)
    gaps = [  # (gap after ordered[i], to the next one round the circle)
        (seconds(ordered[(i + 1) % len(ordered)]) - seconds(t)) % _DAY or _DAY
        for i, t in enumerate(ordered)
    ]
    widest = max(range(len(ordered)), key=lambda i: gaps[i])
    return ordered[(widest + 1) % len(ordered)], ordered[widest]


#: the last line of a Python traceback for a missing key: ``KeyError: 'k'`` (a dict read
#: from ``MELISSA_TRAINER_PARAMETERS``), or the client's ``UnknownParameterError: this
#: simulation has no parameter 'k': ...`` (`Client.parameters`), or the C client's
#: ``no parameter 'k'; the known parameters are [...]`` (`mt_client_error` after
#: `mt_client_parameter`, which a solver prints, prefixed as it likes)
_KEY_ERROR = re.compile(
    r"""\bKeyError: (['"])(?P<key>[^'"]*)\1\s*$"""
    r"""|\bUnknownParameterError: this simulation has no parameter (['"])(?P<named>[^'"]*)\3"""
    r"""|\bno parameter '(?P<c>[^']*)'; the known parameters are \["""
)


def missing_parameter(last_line: str, names: Sequence[str]) -> str | None:
    """The key of a ``KeyError: 'key'`` last log line when `key` is not one of the
    sampler's parameter `names` (a solver reading a parameter the study does not
    draw), else None."""
    match = _KEY_ERROR.search(last_line)
    key = None if match is None else match["key"] or match["named"] or match["c"]
    return None if key is None or key in names else key


@dataclass(frozen=True)
class _Attempt:
    simulation_id: int
    code: int | str
    last_line: str  # (`failure_line`: the one quoted)
    passed: str = ""  # what followed it in the log (`failure_line`), "" if nothing

    def quoted(self, alike: Sequence[_Attempt] = ()) -> str:
        """The failure line as the report says it, its figures' ranges over the attempts
        that failed `alike` (this one among them) where they differ (`spanned`)."""
        line = spanned([self.last_line, *(a.last_line for a in alike if a is not self)])
        ranged = " (its figures' range over the attempts)" if line != self.last_line else ""
        line = line or "(an empty log)"
        if self.passed:
            return f"log line {line!r}{ranged} (the last before {self.passed})"
        return f"last log line {line!r}{ranged}"

    @property
    def key(self) -> tuple[int | str, str]:
        """What two attempts that failed the same way share."""
        return self.code, failure_key(self.last_line)


class SystematicFailure:
    """Watches the failed attempts of a study until it has sent data (module docstring).

    Args:
        attempts: failed attempts after which identical failures stop the study
            (>= 2), or None: never.
        parameters: the names the sampler draws (to tell a solver that reads one it
            does not draw, `missing_parameter`).
    """

    def __init__(self, attempts: int | None, parameters: Sequence[str] = ()) -> None:
        self.attempts = attempts
        self.parameters = tuple(parameters)
        self._seen: list[_Attempt] = []
        self.off = attempts is None
        #: the bound that killed the last attempt killed for its silence, with its fix
        #: (`SilenceClock.bound`'s rule: set by the silence watch), None: none yet
        self.timeout_rule: str | None = None

    def data_seen(self) -> None:
        """A simulation sent data: the solver can run; the check is off from now on."""
        self.off = True
        self._seen.clear()

    def failed(
        self, simulation_id: int, code: int | str, log: Path, reason: str = ""
    ) -> str | None:
        """A failed attempt ended; returns why the study should stop now (the cause, to
        head the study's report), or None. `reason`: the receiver's, for an attempt it
        refused (code "refused"), which stands for the log's last line."""
        if self.off:
            return None
        line, passed = (reason, "") if code == "refused" and reason else failure_line(log)
        attempt = _Attempt(simulation_id, code, line, passed)
        if self._seen and attempt.key != self._seen[0].key:
            self.off = True  # failures that differ: parameters, not the solver
            self._seen.clear()
            return None
        self._seen.append(attempt)
        assert self.attempts is not None
        ids = sorted({a.simulation_id for a in self._seen})
        if len(self._seen) < self.attempts or len(ids) < 2:
            return None
        head = (
            f"every one of the study's first {plural(len(self._seen), 'attempt')} (simulations "
            f"{ids}, different parameters) failed the same way before any simulation sent "
            f"data: "
        )
        check = f"(LauncherTuning.systematic_failures={self.attempts}; None turns this check off)"
        quoted = attempt.quoted(self._seen)  # (its figures' ranges over them)
        if attempt.code == "refused" and reason:
            return (
                f"{head}the receiver refused each: {reason}. The solver's fields are not "
                f"the study's: fix the shapes or dtypes it sends, or the study's schema "
                f"(ReceiverConfig(fields=...)), and start again {check}"
            )
        key = missing_parameter(attempt.last_line, self.parameters)
        if key is not None:
            return (
                f"{head}exit code {code_text(attempt.code)}, {quoted}: the solver "
                f"asked for parameter {key!r}, and the sampler draws {list(self.parameters)}. "
                f"One side has the wrong name: if "
                f"the solver's name is wrong (a typo), fix it in the solver; if the study "
                f"lacks the parameter, add {key!r} to the sampler's bounds, or give the "
                f"solver a value for it; then start again {check}"
            )
        if attempt.code == "timeout":
            return (
                f"{head}each was killed as hung, silent past its timeout (exit code "
                f"timeout), {quoted}. The solver hangs, or its start-up is "
                f"slower than the launcher allows before a first message: run one "
                f"simulation's command by hand and time it to its first send; "
                f"{self._startup_fix()}, and start again {check}. Only a Python solver "
                f"(the Python client) can instead pay its start-up once per job, in "
                f"worker mode (Launcher(..., worker=True), the solver looping on "
                f"next_simulation()); the C and Fortran clients have no worker mode"
            )
        return (
            f"{head}exit code {code_text(attempt.code)}, {quoted}. The solver or its "
            f"environment is at fault, not its parameters: run one simulation's command by "
            f"hand, fix it and start again {check}. Unless the solver fails for part of "
            f"the space only and these {len(ids)} parameter sets all lie there (a solver "
            f"that crashes at start-up for some parameters): then turn the check off, or "
            f"raise it, and narrow the parameters' bounds"
        )

    def _startup_fix(self) -> str:
        """What a slow start-up needs, as the bound that killed the last attempt says."""
        if self.timeout_rule is None:
            return (
                "a slow start-up needs a larger LauncherTuning(startup_timeout=...) (with a "
                "numeric simulation_timeout, that timeout bounds the start-up while "
                "startup_timeout is unset)"
            )
        return f"the launcher's bound on the last attempt was {self.timeout_rule}"
