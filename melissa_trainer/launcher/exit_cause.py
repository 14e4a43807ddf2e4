"""How the launcher's log names an attempt's end (`exit_text`): its exit code, the
signal the code carries, and, for an ``srun`` of several tasks, which task ended first
and how, as srun's own lines in the job's log say (`srun_task_ends`); for MPICH's
``mpiexec`` (hydra), the signal its banner names (`hydra_account`: hydra exits with the
signal's number, ``exit 9`` for a rank's SIGKILL, which alone reads as an exit code).

Why srun's lines: a job of several ranks runs them under ``srun --kill-on-bad-exit=1``
(the batch script, or a step in ``srun`` mode), and srun's exit status is the highest of
its tasks' (an exit code, or 128 + the signal that ended one). When one rank dies (the
out-of-memory killer's SIGKILL, a segmentation fault, an exit code), srun ends the
others with SIGTERM, and its status is theirs: ``exit 143 (SIGTERM)``, read as a
scancel or a preemption (trial F8). srun says what happened on its stderr, which is the
job's log, one line per group of tasks as their end is reported, the first first::

    srun: error: node1: task 1: Killed
    srun: launch/slurm: _step_signal: Terminating StepId=1.0
    slurmstepd-node1: error: *** STEP 1.0 ON node1 CANCELLED AT 2026-11-30T21:26:10 ***
    srun: error: node1: task 0: Terminated
    srun: Force Terminated StepId=1.0

(Slurm 22.05 on the one-node test cluster; the task part is srun's ``"%s: %s %s: %s"``
of node list, ``task``/``tasks``, task ids, then ``Exited with exit code N`` or the
signal's ``strsignal`` text, with `` (core dumped)`` when one was.) Tasks that exit 0 get
no such line.

What is claimed, and only when srun's lines account for the exit code (the highest of
their codes is the code: else they are not this attempt's, or srun's status came from
elsewhere, and the plain code is said): the lines in srun's order, the first named the
first to end, each signal named. Which lines are this attempt's: a job's log is
appended to by its restarts, so the lines taken are the last run of them in the tail,
back to the first task id seen twice (an srun reports each task once), and followed by
nothing but Slurm's own lines (``srun:``, ``slurmstepd``, ``salloc:``): a later attempt
that printed anything is not described by an earlier one's. ``sacct`` is not asked: it
needs the accounting daemon (slurmdbd), which many small clusters (and the test one)
lack. The same lines give `own_exit`: the code of the task whose own exit made srun
end the others, the code `LauncherTuning.final_exit_codes` is asked about.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.client.worker_codes import NOT_DELIVERED_EXIT_CODE, REFUSED_EXIT_CODE
from melissa_trainer.launcher.log_lines import tail_lines

__all__ = [
    "TaskEnd",
    "code_signal",
    "code_text",
    "codes_text",
    "exit_text",
    "hydra_account",
    "own_exit",
    "signal_text",
    "srun_account",
    "srun_task_ends",
    "worker_exit_text",
]

#: what usually sends the signals that end a simulation from outside, for the log line
_SENDERS = {
    signal.SIGTERM: "scancel, a job's time limit or preemption, or a kill",
    signal.SIGKILL: "the kernel's out-of-memory killer, scancel --signal=KILL, or kill -9",
}
#: glibc's strsignal texts (what srun prints), fixed here so that the reading does not
#: depend on the trainer's libc; `signal.strsignal` answers for the others
_DESCRIPTIONS = {
    "Hangup": signal.SIGHUP,
    "Interrupt": signal.SIGINT,
    "Quit": signal.SIGQUIT,
    "Illegal instruction": signal.SIGILL,
    "Trace/breakpoint trap": signal.SIGTRAP,
    "Aborted": signal.SIGABRT,
    "Bus error": signal.SIGBUS,
    "Floating point exception": signal.SIGFPE,
    "Killed": signal.SIGKILL,
    "User defined signal 1": signal.SIGUSR1,
    "Segmentation fault": signal.SIGSEGV,
    "User defined signal 2": signal.SIGUSR2,
    "Broken pipe": signal.SIGPIPE,
    "Alarm clock": signal.SIGALRM,
    "Terminated": signal.SIGTERM,
    "CPU time limit exceeded": signal.SIGXCPU,
    "File size limit exceeded": signal.SIGXFSZ,
}
_TASK_LINE = re.compile(
    r"^srun: error: (?P<nodes>\S+): (?P<word>tasks?) (?P<tasks>[0-9][0-9,\-]*): (?P<what>.+?)\s*$"
)
_EXITED = re.compile(r"Exited with exit code (?P<code>[0-9]+)")
_CORE = " (core dumped)"
#: srun's line as it signals the step's tasks after one ended badly (--kill-on-bad-exit;
#: "Terminating job step N.M" before Slurm 20.11)
_TERMINATING = re.compile(
    r"^srun: (?:launch/slurm: _step_signal: )?Terminating (?:StepId=|job step )"
)
_SLURM_LINE = ("srun:", "slurmstepd", "salloc:")
#: the last lines of hydra's banner (MPICH's mpiexec) for a rank ended by a signal
_HYDRA_EXIT = re.compile(
    r"^YOUR APPLICATION TERMINATED WITH THE EXIT STRING: (?P<what>.+) \(signal (?P<n>[0-9]+)\)$"
)
_HYDRA_AFTER = (
    "This typically refers to a problem with your application.",
    "Please see the FAQ page for debugging suggestions",
)
#: bytes read from the end of a log for srun's lines
_TAIL_BYTES = 16384
#: task lines after the first said in full (a job of many ranks may have many)
_MORE_SHOWN = 2


def signal_text(number: int) -> str:
    """``SIGNAME`` of signal `number`, with what usually sends it from outside when it
    is one of those (SIGTERM, SIGKILL); "" for a number that is no signal."""
    try:
        name = signal.Signals(number)
    except ValueError:
        return ""
    sender = _SENDERS.get(name)
    return name.name + (f": {sender}" if sender else "")


def code_signal(code: int | str) -> signal.Signals | None:
    """The signal an exit code carries, the way either backend reports it (a process's
    ``-N``; a Slurm job's or a shell's ``128 + N``), None for a plain code (0-128, a code
    above 128 that is no signal's, a string such as ``timeout``)."""
    if not isinstance(code, int):
        return None
    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        return signal.Signals(number) if number else None
    except ValueError:
        return None


def code_text(code: int | str) -> str:
    """An exit code, short: ``143 (SIGTERM)``, ``-9 (SIGKILL)`` when it carries a
    signal (`code_signal`), else as is (``1``, ``timeout``): a raw ``143`` reads as the
    solver's own code. `exit_text` says more (what sends the signal, srun's account)."""
    sig = code_signal(code)
    return f"{code} ({sig.name})" if sig is not None else str(code)


def codes_text(codes: Iterable[int | str]) -> str:
    """A list of exit codes as the log shows it: ``[1, 143 (SIGTERM), 'timeout']``
    (`code_text` of each code, a string quoted as in a Python list)."""
    return "[" + ", ".join(repr(c) if isinstance(c, str) else code_text(c) for c in codes) + "]"


def _signal_of(description: str) -> signal.Signals | None:
    if description in _DESCRIPTIONS:
        return _DESCRIPTIONS[description]
    for number in signal.valid_signals():
        if signal.strsignal(number) == description:
            return signal.Signals(number)
    return None


@dataclass(frozen=True)
class TaskEnd:
    """One of srun's ``srun: error: NODES: task(s) IDS: WHAT`` lines.

    Attributes:
        tasks: the task ids as srun wrote them ("1", "0-1", "0,2-3").
        plural: srun wrote "tasks" (several ids), not "task".
        what: srun's words ("Killed", "Exited with exit code 3", "Segmentation fault
            (core dumped)").
        code: what srun counts for them: the exit code, or 128 + the signal.
        signal: the signal that ended them, None for an exit code.
    """

    tasks: str
    plural: bool
    what: str
    code: int
    signal: signal.Signals | None

    @property
    def ids(self) -> frozenset[int]:
        out: set[int] = set()
        for part in self.tasks.split(","):
            first, _, last = part.partition("-")
            if first:
                out.update(range(int(first), int(last or first) + 1))
        return frozenset(out)

    def __str__(self) -> str:
        return f"{'tasks' if self.plural else 'task'} {self.tasks}: {self.what}"


def _task_end(line: str) -> TaskEnd | None:
    match = _TASK_LINE.match(line.strip())
    if match is None:
        return None
    what = match["what"]
    exited = _EXITED.fullmatch(what)
    if exited is not None:
        code, sig = int(exited["code"]), None
    else:
        sig = _signal_of(what.removesuffix(_CORE))
        if sig is None:
            return None  # words srun does not write for a task's end: not claimed
        code = 128 + int(sig)
    return TaskEnd(match["tasks"], match["word"] == "tasks", what, code, sig)


def _slurm_part(line: str) -> str:
    """`line`, stripped, from Slurm's own words on: a rank killed mid-line leaves its
    output without a newline, and srun's next line runs on from it in the log
    (``...step 7srun: error: vm: task 1: Killed``; tests/launcher/test_srun_task_ends.py)."""
    line = line.strip()
    if line.startswith(_SLURM_LINE):
        return line
    cut = line.find("srun: ")
    return line[cut:] if cut > 0 else line


def srun_task_ends(lines: list[str]) -> tuple[list[TaskEnd], bool]:
    """srun's task-end lines of the last srun in `lines` (a log's, oldest first), in
    srun's order, and whether srun said it was terminating the step right after the
    first (its --kill-on-bad-exit); ([], False) when the log does not end with them
    (module docstring: lines other than Slurm's after them are a later attempt's)."""
    ends: list[tuple[int, TaskEnd]] = []
    seen: set[int] = set()
    for index in range(len(lines) - 1, -1, -1):
        line = _slurm_part(lines[index])
        end = _task_end(line)
        if end is None:
            if not ends and not line.startswith(_SLURM_LINE):
                return [], False  # printed after srun's last task line: not its attempt
            continue
        if end.ids & seen:
            break  # a task reported twice: the lines before are an earlier srun's
        seen |= end.ids
        ends.append((index, end))
    if not ends:
        return [], False
    ends.reverse()
    first = ends[0][0]
    stop = ends[1][0] if len(ends) > 1 else len(lines)
    terminating = any(_TERMINATING.match(line.strip()) for line in lines[first + 1 : stop])
    return [end for _, end in ends], terminating


def srun_account(code: int, lines: list[str]) -> str | None:
    """What srun's lines in `lines` say of an attempt that ended with `code`, e.g.
    ``srun: task 1: Killed first (SIGKILL: ...), then srun terminated the step: task
    0: Terminated``; None when they are not there or do not account for `code`."""
    ends, terminating = srun_task_ends(lines)
    if not ends or max(end.code for end in ends) != code:
        return None
    first, rest = ends[0], ends[1:]
    how = f" ({signal_text(first.signal)})" if first.signal is not None else ""
    if not rest:
        return f"srun: {first}{how}"
    shown = ", ".join(map(str, rest[:_MORE_SHOWN])) + (", ..." if len(rest) > _MORE_SHOWN else "")
    then = "then srun terminated the step: " if terminating else "then "
    return f"srun: {first} first{how}, {then}{shown}"


def own_exit(code: int | str, log: Path | None) -> TaskEnd | None:
    """The task whose own exit code failed an srun that ended with `code`, from srun's
    lines at the end of `log` (`srun_task_ends`): the first task to end exited with a
    code (no signal), srun terminated the step right after it (``--kill-on-bad-exit``:
    the others' SIGTERM, whose 143 is then srun's status, seen on the test cluster for
    a 2-task step whose task 1 exited 3), and the lines account for `code`. None
    otherwise (no log, no such lines, a signal first: a scancel or a preemption)."""
    if log is None or not isinstance(code, int) or code <= 0:
        return None
    try:
        lines = tail_lines(log, _TAIL_BYTES)
    except OSError:
        return None
    ends, terminating = srun_task_ends(lines)
    if not ends or not terminating or max(end.code for end in ends) != code:
        return None
    first = ends[0]
    return first if first.signal is None and first.code > 0 else None


def hydra_account(code: int, lines: list[str]) -> str | None:
    """What hydra's banner at the end of `lines` says of an attempt that ended with
    `code`, e.g. ``mpiexec: a rank's end: Killed (signal 9), SIGKILL: ...``; None when
    the log does not end with it or its signal is not `code` (hydra exits with the
    signal's number, 9, which alone reads as the solver's own ``exit(9)``)."""
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index].strip()
        match = _HYDRA_EXIT.match(line)
        if match is not None:
            break
        if line not in _HYDRA_AFTER:
            return None  # printed after the banner (or no banner): not claimed
    else:
        return None
    number = int(match["n"])
    if number != code:
        return None
    how = signal_text(number)
    return f"mpiexec: a rank's end: {match['what']} (signal {number})" + (f", {how}" if how else "")


def exit_text(code: int | str, log: Path | None = None, *, srun: bool = False) -> str:
    """An attempt's end as the log says it: ``exit N``, with the signal when the code
    carries one, the way either backend reports it (a process's ``-N``; a Slurm job's
    or a shell's ``128 + N``), e.g. ``exit 143 (SIGTERM: scancel, ...)``: a
    scancelled job is not a solver's own failure. With the attempt's `log`, srun's
    account instead when it has one (`srun_account`) and `srun` (the job's backend runs
    its ranks under srun: `Backend.srun_tasks`, as for `own_exit`; another backend's
    solver may print such lines itself), e.g. ``exit 143 (srun: task 1: Killed first
    (SIGKILL: ...), then ...)``: a rank's own end, not srun's SIGTERM of the others; or
    hydra's (`hydra_account`), e.g. ``exit 9 (mpiexec: a rank's end: Killed (signal
    9), SIGKILL: ...)``. A string code (``timeout``) as is."""
    if not isinstance(code, int):
        return code
    if log is not None and code > 0:
        try:
            lines = tail_lines(log, _TAIL_BYTES)
        except OSError:
            lines = []  # no log: the code alone (the report says the log is missing)
        account = (srun_account(code, lines) if srun else None) or hydra_account(code, lines)
        if account is not None:
            return f"exit {code} ({account})"
    sig = code_signal(code)
    return f"exit {code} ({signal_text(sig)})" if sig is not None else f"exit {code}"


#: what a worker's report of a simulation's end means, for the codes of its own
#: (`client.worker.serve_simulations`); another code is the solver's, said as is
_WORKER_CODES = {
    NOT_DELIVERED_EXIT_CODE: (
        "not delivered: the trainer did not take its data or confirm its end, and the "
        "worker went on; the worker's log says why"
    ),
    REFUSED_EXIT_CODE: (
        "its parameters refused: serve_simulations' check, or a solver's usage error; the "
        "worker's log says why"
    ),
}


def worker_exit_text(code: int | str) -> str:
    """An attempt's end as a worker reported it (worker mode: no process ended), e.g.
    ``exit 75 (not delivered: ...)``: the codes `serve_simulations` reports itself in
    words (a bare ``exit 75`` read as the solver's own failure), any other as
    `exit_text` says it without a log."""
    words = _WORKER_CODES.get(code) if isinstance(code, int) else None
    return exit_text(code) if words is None else f"exit {code} ({words})"
