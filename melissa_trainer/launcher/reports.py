"""What the launcher is told and what it tells: the receivers' `DataReport` (which
simulations' data is complete, which HELLOs were refused), and a failed study's
`LauncherError`, whose message counts the study (`study_counts`), quotes the failed
simulations' logs (`failure_report`, `log_tail`) and lists those running
(`running_report`). The supervisor gathers the facts under its lock; these functions
only format them.

Shared by `supervisor`, `worker_mode` and `launcher`; imports nothing of theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.exit_cause import codes_text
from melissa_trainer.launcher.log_lines import log_lines
from melissa_trainer.launcher.systematic import (
    failure_key,
    failure_line,
    runtime_line,
    spanned,
)

__all__ = [
    "LOG_TAIL_LINES",
    "MAX_SHOWN",
    "DataReport",
    "LauncherError",
    "RunningSimulation",
    "failure_report",
    "kills_report",
    "log_tail",
    "repeated_failures",
    "running_report",
    "study_counts",
]

#: log lines of a failed simulation quoted in the study's error
LOG_TAIL_LINES = 5
#: kinds of failure quoted, and simulations running listed, in a study's error
MAX_SHOWN = 8
#: bytes read from the end of a log for its tail (a few long lines fit; never the whole log)
_TAIL_BYTES = 8192


class DataReport(Protocol):
    """What the receivers tell the study (in a trainer: rank 0's receiver, with every
    rank's wait for room: `study.every_rank`).

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

    def first_message_at(self, simulation_id: int) -> float | None:
        """`time.monotonic()` when the simulation's first message arrived (None: not
        yet, or not known): its first attempt's start-up, exact (`advice`)."""

    def client_of(self, simulation_id: int) -> str | None:
        """The client library the simulation's HELLO named ("python", "c": the C client
        or the Fortran bindings on it), None when unknown (`advice`: worker mode is
        advised to Python solvers only)."""


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a job's log, indented, or a note if there is none;
    without hydra's banner of a SIGTERM, Slurm's lines of a kill and the launcher's own
    lines (`log_lines`: the launcher's kill and its start, Slurm's cancellation, not the
    solver's output). The lines a runtime printed after the failure line
    (`runtime_line`: an MPI abort banner, gfortran's backtrace) are counted in a note,
    not quoted: a trial's report quoted five frames of a backtrace and not the client's
    line above them."""
    try:
        kept, left_out = log_lines(path, _TAIL_BYTES)
    except OSError as exc:
        return f"    (no log: {exc.strerror})"
    end = len(kept)
    while end > 0 and (not kept[end - 1].strip() or runtime_line(kept[end - 1])):
        end -= 1
    if end == 0:  # (nothing but a runtime's lines: those are what it said)
        end = len(kept)
    tail = kept[max(0, end - lines) : end]
    after = [line for line in kept[end:] if line.strip()]
    if tail:
        quoted = "\n".join(f"    | {line}" for line in tail)
        if after:
            kinds = " and ".join(sorted({runtime_line(line) for line in after}))
            quoted += f"\n    (then {plural(len(after), 'line')} of {kinds})"
        return quoted
    if left_out:
        return f"    (nothing but {left_out}: the solver printed nothing)"
    return "    (empty log: nothing from the solver)"


class LauncherError(RuntimeError):
    """The study failed: a simulation failed for good with ``on_failure="raise"`` (or its
    redraws ran out), a job could not be started, or the launcher's thread died."""


def study_counts(
    counts: Mapping[str, float], n_simulations: int, attempts: int, launched: int | None = None
) -> str:
    """One line of a study's counts (`StudyRecord.summary`) that adds up: the places of
    the study (finished, abandoned, failed and not replaced: the failure that failed the
    study, said only when there is one; running, exited, pending: `n_simulations` in
    all), then those that failed for good and were replaced by a new draw (under
    "redraw", `counts["redraws"]` of them; said unless some failed and none was), then
    the attempts: `launched` (None: `attempts`), and of them the `attempts` that ended
    (with an exit code) when some have not (they run: a user trial read "2 attempts in
    all" of a study that had launched 3)."""
    kept = int(counts.get("not_replaced", 0))
    places = [(k, int(counts[k])) for k in ("finished", "abandoned")]
    if kept:
        places.append(("failed (not replaced)", kept))
    places += [(k, int(counts[k])) for k in ("running", "exited", "pending")]
    total = sum(n for _, n in places)
    parts = ", ".join(f"{n} {k}" for k, n in places)
    replaced = max(0, int(counts["failed"]) - kept)
    if replaced:
        each = "each replaced by a new draw" if replaced > 1 else "replaced by a new draw"
        besides = f"besides, {replaced} failed for good, {each}; "
    else:
        besides = "" if kept else "besides, 0 failed for good; "
    if launched is None or launched <= attempts:
        tried = f"{plural(attempts, 'attempt')} in all"
    else:
        tried = f"{plural(launched, 'attempt')} launched in all, {attempts} of them ended"
    return f"study of {plural(n_simulations, 'simulation')}: {parts} (= {total}); {besides}{tried}"


def failure_report(
    failed: Sequence[tuple[int, str, tuple[int | str, ...]]],
    log_of: Callable[[int], Path],
    log_dir: Path,
    status: Mapping[int, str] | None = None,
) -> list[str]:
    """The lines of a study's error that quote its failures: those that failed alike
    (the same failing exit codes, the same failure line: `failure_line`, an MPI abort
    banner passed over, its rank, node and pid numbers masked by `failure_key`, as the
    study's stop on a systematic failure compares them; grouped by the log's last line,
    a user trial read "2 simulations (0, 2) failed alike" then "2 simulations (1, 3)"
    where that line was MPICH's banner of whichever rank aborted first, and different
    failures ending in the same banner were one kind) once with their ids, each with
    the last lines of its log (at most `MAX_SHOWN` kinds). Each simulation listed had an
    attempt fail; with `status`, a kind whose simulations were not all given up says
    what became of each (`_fates`): the study's counts say "N failed for good", and a
    user trial read "5 simulations failed alike" next to "4 failed for good" (the fifth
    one's attempt ended as the study stopped: recorded pending, no policy applied).

    Args:
        failed: (id, description, exit codes) of each simulation that failed, in id order.
        log_of: a simulation's log.
        log_dir: where the other logs are (named when kinds are left out).
        status: each listed simulation's status now (`simulation_record.STATUSES`).
    """
    lines = []
    kinds: dict[tuple[frozenset[int | str], str], list[tuple[int, str, str]]] = {}
    for sid, text, codes in failed:
        said = failure_line(log_of(sid))[0]
        key = (frozenset(c for c in codes if c != 0), failure_key(said))
        kinds.setdefault(key, []).append((sid, text, said))
    for (failing, _), members in list(kinds.items())[:MAX_SHOWN]:
        sid, text, said = members[0]
        if len(members) == 1:
            lines.append(f"  {text}; last lines of {log_of(sid)}:")
        else:
            ids = [m[0] for m in members]
            shown = ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else "")
            lines.append(
                f"  {len(ids)} simulations ({shown}) failed alike (exit codes "
                f"{codes_text(sorted(failing, key=str))}, the same failure line"
                f"{_ranges(said, [m[2] for m in members])}), their parameters "
                f"differing{_fates(ids, status)}; last lines of {log_of(sid)}:"
            )
        lines.append(log_tail(log_of(sid)))
    if len(kinds) > MAX_SHOWN:
        lines.append(f"  ... and other failures (see {log_dir})")
    return lines


def _ranges(first: str, said: Sequence[str]) -> str:
    """ ", its figures over them: 'diverged after 3.2-4.1 s'" when the failure lines of
    one kind (`said`, `first` among them, first) differ in their durations or clock times
    (`spanned`: the log tail below shows the first one's figures only); else nothing."""
    line = spanned(said)
    return "" if line == first else f", its figures over them: {line!r}"


#: what became of a simulation that failed alike, by its status (`_fates`); in the
#: order said, "pending" last (its gloss ends the clause)
_FATE = {
    "failed": "failed for good",
    "abandoned": "failed for good",
    "finished": "finished on a restart",
    "complete": "ran again",
    "exited": "ran again",
    "running": "running again",
    "pending": "pending",
}


def _fates(ids: Sequence[int], status: Mapping[int, str] | None) -> str:
    """What became of simulations that failed alike (", of them 4 failed for good (0, 1,
    2, 3) and 1 pending (4), not given up when the study stopped"), said when not all of
    them failed for good (the study's counts name those); else nothing."""
    if status is None or all(status.get(s) in ("failed", "abandoned") for s in ids):
        return ""
    groups: dict[str, list[int]] = {}
    for sid in ids:
        groups.setdefault(_FATE.get(status.get(sid, ""), "pending"), []).append(sid)
    said = [
        f"{len(members)} {fate} ({', '.join(map(str, members[:10]))}"
        f"{', ...' if len(members) > 10 else ''})"
        for fate in dict.fromkeys(_FATE.values())
        if (members := groups.get(fate))
    ]
    if "failed for good" not in groups:
        said[0] = f"none failed for good: {said[0]}"
    text = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
    if "pending" in groups:  # (the study stopped: its error is what reads this)
        text += ", not given up when the study stopped"
    return f", of them {text}"


def repeated_failures(failed: Sequence[tuple[int, str, tuple[int | str, ...]]]) -> list[str]:
    """A line for a study's error when some simulations failed alike on every attempt
    (two or more, the same exit code or all killed for silence): restarts did not help,
    as with a deterministic solver; `failed` as in `failure_report`."""
    ids = [
        sid
        for sid, _, codes in failed
        if len(codes) >= 2 and 0 not in codes and len(set(codes)) == 1
    ]
    if not ids:
        return []
    shown = ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else "")
    return [
        f"  {plural(len(ids), 'simulation')} ({shown}) failed the same way on every attempt: "
        f"restarts did not help. For a deterministic solver, "
        f"LauncherTuning(final_exit_codes=(...)) names the exit codes by which it says its "
        f"failure will repeat (given up at once, others still restarted), and "
        f"LauncherTuning(max_restarts=0) gives a simulation up at its first failure; both "
        f"draw new parameters in its place (on_failure='redraw')"
    ]


class RunningSimulation(NamedTuple):
    """A simulation running, as a study's error lists it."""

    simulation_id: int
    attempt: str  # "attempt N, parameters {...}"
    sending: bool  # a message of this attempt came
    silent: float  # seconds of its own silence
    log_path: Path


def running_report(shown: Sequence[RunningSimulation], running: int, log_dir: Path) -> list[str]:
    """A line per simulation in `shown` (the first `MAX_SHOWN` of the `running` ones, in
    id order), then how many more run."""
    lines = []
    for sim in shown:
        heard = "messages received" if sim.sending else "no message received yet"
        lines.append(
            f"  running: simulation {sim.simulation_id} ({sim.attempt}, {heard}, silent "
            f"{sim.silent:.0f} s); log: {sim.log_path}"
        )
    if running > len(shown):
        lines.append(f"  ... and {running - len(shown)} more running (see {log_dir})")
    return lines


def kills_report(names: Sequence[str], grace: float) -> str:
    """The one line a stopping supervisor logs for the jobs it kills (`MAX_SHOWN` named)."""
    shown = ", ".join(names[:MAX_SHOWN]) + (", ..." if len(names) > MAX_SHOWN else "")
    return (
        f"stopping: killing {plural(len(names), 'job')} ({shown}), given "
        f"kill_grace={grace} s to exit"
    )
