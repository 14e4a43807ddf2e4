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

The launcher writes lines of its own in a job's log (`launcher_line`, each starting with
`LAUNCHER`: when and how it started the job, that it killed it and why, what Slurm said
of its end): so that a user reading the log knows them from the solver's, and greps
them. A report's quote of the log's last lines (`tail_lines`) leaves them out: they are
not the solver's output, and a hung solver killed by the launcher would otherwise be
quoted as saying "killed by the launcher".

A Slurm job's log also ends, when it is killed (the launcher's scancel, a time limit, a
preemption, srun ending the other ranks after one failed), with Slurm's lines and the
batch script's shell's, seen on the one-node test cluster::

    slurmstepd-vm: error: *** JOB 4082977 ON vm CANCELLED AT 2026-12-07T07:19:25 ***
    Terminated

(a step's: ``*** STEP 12.0 ON ...``, ``srun: error: vm: task 0: Terminated``, ``srun:
Force Terminated StepId=12.0``; bash's, for a command it ran: ``/var/spool/slurmd/
job12/slurm_script: line 40: 77 Terminated ...`` or a bare ``Terminated``). Quoted as
the solver's last lines, a user read them as the solver's words, and every killed job's
log had the same last line (reports group failures by it, `failure_line`). They are
left out (`SLURM_END`, the one rule: `systematic` reads the lines kept), in a Slurm
job's log only (`slurm_log`: a local job's solver may print a bare ``Terminated``
itself): the attempt's end is said apart, by its exit code (``exit 143 (SIGTERM:
scancel, ...)``) and the launcher's own line in the log, and `exit_cause` reads them
from `tail_lines`, which keeps them. Not left out: Slurm's lines of how a rank died by
itself (``srun: error: vm: task 1: Segmentation fault``, ``Killed``, an exit code;
slurmstepd's out-of-memory ``oom-kill`` line), which say the solver's failure.
"""

from __future__ import annotations

import logging
import os
import re
import textwrap
import time
from itertools import takewhile
from pathlib import Path

__all__ = [
    "COLUMNS",
    "LAUNCHER",
    "MORE",
    "SLURM_END",
    "cut",
    "launcher_line",
    "log_lines",
    "inform",
    "said_lines",
    "slurm_log",
    "tail_lines",
    "warn",
    "without_kill_banners",
]

logger = logging.getLogger(__name__)

#: the start of every line the launcher writes in a job's log (`launcher_line`)
LAUNCHER = "[melissa-trainer launcher] "

_START = "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
_EXIT = "YOUR APPLICATION TERMINATED WITH THE EXIT STRING:"
_TERMINATED = "Terminated (signal 15)"
_AFTER = (
    "This typically refers to a problem with your application.",
    "Please see the FAQ page for debugging suggestions",
)
_BLOCK = 8  # the banner's lines from its start to its exit string, at most
#: Slurm's and the batch script's shell's lines of a job's or a step's kill (module
#: docstring), matched on the stripped line: slurmstepd's cancellation (any "DUE TO"),
#: srun's as it ends a step (and before Slurm 20.11 "Terminating job step"), a task
#: ended by SIGTERM, bash's line of its command ended by SIGTERM
SLURM_END = re.compile(
    r"^slurmstepd\S*: error: \*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT "
    r"|^srun: (?:Force Terminated|Job step aborted|launch/slurm: _step_signal"
    r"|Terminating job step)"
    r"|^srun: error: .*: tasks? [\d,-]+: Terminated$"
    r"|^Terminated$|^\S*slurm_script: line \d+: +\d+ Terminated\b"
)


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


#: the columns of a terminal a user reads a job's log or the console in (`cut`)
COLUMNS = 100
#: a command the user is told to run, which `cut` keeps on one line (copied from the
#: console, a command cut from its job id runs with none): a Slurm command with its
#: options and its job (``scancel 40829771``, ``scontrol release JOBID``, ``scancel
#: --signal=KILL 4082977_3``; scontrol's verb with it, ``scontrol show partition``),
#: any text quoted in backticks, or, after any command, an option with its value
#: (``--resume_from_checkpoint latest``, ``mpiexec -n 2``: a value is a word that does
#: not start with a dash or a parenthesis, so that a flag before prose, ``--no-kill
#: (salloc/sbatch -k)``, is not taken for one with a value)
_COMMAND = re.compile(
    r"(?<![\w-])(?:(?:scancel|sinfo|squeue|sbatch|salloc|srun|sacct)\b"
    r"|scontrol (?:show \w+|[a-z]+)\b)"
    r"(?: --?[\w-]+(?:=[^\s,;)]+)?)*(?: (?:\d+(?:[._+]\d+)*|JOBID)\b)?"
    r"|`[^`\n]+`"
    r"|(?<![\w-])--?[A-Za-z][\w-]* [^\s(\-]\S*"
)
#: a number's space before its unit or noun, which `cut` does not cut at (not a
#: command's job id, glued to its command: "scancel 40829771 to give it up")
_NUMBER_UNIT = re.compile(r"(?<![\w.\0])(\d+(?:\.\d+)?) (?=[A-Za-z%])")
#: how a line of the launcher's that goes on from the one above starts (`launcher_line`)
MORE = LAUNCHER + "  "


def _glued(span: str) -> str:
    """`span` as one word for `textwrap` (its spaces held as NULs, given back by `cut`)."""
    return span.replace(" ", "\0")


def cut(text: str, first: str = "", rest: str = "  ", whole: str | None = None) -> list[str]:
    """`text` cut at spaces into lines of at most `COLUMNS` characters, the first
    starting with `first`, each next one with `rest`: the one implementation of the
    launcher's long lines (its lines in a job's log, `launcher_line`; its WARNINGs,
    which the console prints as they are). What a user copies is never cut: a command
    named in `text` (`_COMMAND`: ``scancel 40829771``, never ``scancel`` then
    ``40829771``; an option with its value, ``-n 2``) stays whole on one line, and
    `whole` (a command given apart) goes on a line of its own after `text`, after
    `rest`; either is longer than a line if it is (selected, it pastes as it runs). A
    word longer than a line stays whole on a line of its own; a number stays with its
    unit ("after 5 s", never "after 5" then "s)"). Joined by single spaces after `rest`
    is taken off, the lines give `text` (then `whole`) back (the runs of spaces of
    `text` as one)."""
    kept = _NUMBER_UNIT.sub("\\1\0", _COMMAND.sub(lambda m: _glued(m[0]), text))
    lines = textwrap.wrap(
        kept, COLUMNS, initial_indent=first, subsequent_indent=rest,
        break_long_words=False, break_on_hyphens=False,
    ) or [first.rstrip()]  # fmt: skip
    lines = [line.replace("\0", " ") for line in lines]
    return lines if whole is None else [*lines, rest + whole]


def warn(log: logging.Logger, text: str) -> None:
    """`text` in a WARNING of `log`, cut into lines of at most `COLUMNS` (`cut`: the
    console prints a WARNING as it is; each next line starts with two spaces, and
    joined back by single spaces they give `text`)."""
    _cut_log(log, logging.WARNING, text)


def _cut_log(log: logging.Logger, level: int, text: str) -> None:
    """`text` cut by `cut`, its lines in one record of `log` at `level`."""
    log.log(level, "%s", "\n".join(cut(text)))


def inform(log: logging.Logger, text: str) -> None:
    """`text` in an INFO of `log`, cut as `warn` cuts a WARNING (the console prints an
    INFO as it is too)."""
    _cut_log(log, logging.INFO, text)


def _escaped(text: str) -> str:
    """`text` with its newlines written as ``\\n``: a command's argument may hold one,
    and a line of it without the prefix would be quoted as the solver's."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def launcher_line(path: str | os.PathLike[str] | None, text: str, whole: str | None = None) -> None:
    """Append ``LAUNCHER + UTC time + ": " + text`` to the job log `path` (made with its
    folder if missing; None: no log, nothing written), cut at spaces into lines of at
    most `COLUMNS` characters (`cut`), each after the first starting with `MORE` (the
    prefix and two spaces): a kill's line was ~240 characters, a Slurm end's up to ~690,
    read in a terminal of 100 columns. `whole` (a command, which a user copies) goes on
    a line of its own after `text`, starting with `MORE`, never cut (`cut`'s `whole`:
    longer than a line if it is; selected after the prefix, it pastes as it ran; a
    command named in `text` is kept whole on one line by the same `cut`). Written at
    once (one append), on a new line: after a solver's last line that has no newline
    yet (a print cut by the kill), one is added first, so that each line starts with
    `LAUNCHER` (greps, `tail_lines`). Newlines in `text` or `whole` are written as
    ``\\n``. A log that cannot be written is said in a warning with the text (never
    raised: the job's start or kill goes on)."""
    if path is None:
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    command = None if whole is None else _escaped(whole)
    lines = cut(_escaped(text), f"{LAUNCHER}{stamp}: ", MORE, command)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+b") as log:  # (appended: O_APPEND, as the job's own writes)
            cut_off = False
            if (size := log.seek(0, os.SEEK_END)) > 0:
                log.seek(size - 1)
                cut_off = log.read(1) != b"\n"
            log.write((("\n" if cut_off else "") + "".join(f"{li}\n" for li in lines)).encode())
    except OSError as exc:
        logger.warning("cannot write to the job log %s (%s): %s", path, exc, text)


def said_lines(lines: list[str]) -> list[str]:
    """The launcher's lines among `lines` (a log's), each with the lines that go on
    from it (`MORE`) joined back by a space: its texts as `launcher_line` was given
    them (a command given as `whole` after its text)."""
    said: list[str] = []
    for line in lines:
        if line.startswith(MORE) and said:
            said[-1] += " " + line.removeprefix(MORE)
        elif line.startswith(LAUNCHER):
            said.append(line)
    return said


def tail_lines(path: Path, tail_bytes: int) -> list[str]:
    """The non-blank lines of the last `tail_bytes` of `path`, as they are (the first
    may be cut), without the launcher's own (`LAUNCHER`: not the solver's output).

    Raises:
        OSError: the log cannot be read.
    """
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - tail_bytes))
        text = f.read().decode("utf-8", "replace")
    return [line for line in text.splitlines() if line.strip() and not line.startswith(LAUNCHER)]


#: the launcher's start line (`Job.say_start`), which names the job's backend: as it
#: is written (``starting sim-0 (attempt 0, slurm, 1 rank):``), or as it was before
#: (``starting simulation 0 attempt 0 as job sim-0 (slurm backend, 1 rank):``: a log
#: its study's restart appends to)
_STARTED = re.compile(
    re.escape(LAUNCHER) + r"\S+: starting (?:\S+ \([^(),]*, (?P<backend>[\w-]+), \d+ ranks?\):"
    r"|.+? as job \S+ \((?P<before>[\w-]+) backend, )"
)


def slurm_log(path: Path) -> bool:
    """Whether `path` may hold Slurm's lines of a kill (`SLURM_END`): False when its
    first line is the launcher's start line (`Job.say_start`) naming another backend
    than "slurm" (a local or mpiexec job: a bare ``Terminated`` there is the solver's
    own line, and was left out of its quote as Slurm's); True otherwise (a Slurm job,
    or a log the launcher did not start).

    Raises:
        OSError: the log cannot be read.
    """
    with open(path, "rb") as f:
        head = f.read(4096).decode("utf-8", "replace").splitlines()
    # (the start line, cut: its first line and the ones that go on from it)
    first = said_lines(head[:1] + list(takewhile(lambda li: li.startswith(MORE), head[1:])))
    started = _STARTED.match(first[0]) if first else None
    return started is None or (started["backend"] or started["before"]) == "slurm"


def log_lines(path: Path, tail_bytes: int) -> tuple[list[str], str]:
    """The non-blank lines of the last `tail_bytes` of `path` without hydra's banners of
    a SIGTERM (`without_kill_banners`) and, in a Slurm job's log (`slurm_log`), Slurm's
    lines of a kill (`SLURM_END`), and what was left out, for a quote that has nothing
    else ("" when nothing was).

    Raises:
        OSError: the log cannot be read.
    """
    lines, banners = without_kill_banners(tail_lines(path, tail_bytes))
    slurm = slurm_log(path)
    kept = [line for line in lines if not (slurm and SLURM_END.search(line.strip()))]
    if banners:
        return kept, "mpiexec's banner of its SIGTERM"
    return kept, "Slurm's lines of the job's end" if len(kept) < len(lines) else ""
