"""Slurm batch scripts and job steps, as pure functions (tested without Slurm).

The job `SlurmBackend` submits is built here: its name, its batch script, its
environment, an ``srun`` step inside an allocation. What Slurm is asked about a job (the
``sbatch``, ``squeue``, ``sacct``, ``scontrol`` and ``scancel`` command lines, the
parsers of their output, the job states, the exit codes) is `queries`'. Nothing here
runs a process or touches the file system.

Choices made for the batch script (see `batch_script`):

* A job of one rank runs its command directly in the batch step; a job of several
  ranks runs it under ``srun`` (one task per rank, ``--kill-on-bad-exit=1`` so that
  one failed rank ends the others instead of leaving them blocked in a collective).
  Either way Slurm tracks every process of the job, so ``scancel`` ends them all.
* The command is not ``exec``'d: the script stays to write its exit code to a small
  file (`exit_file`, written aside then renamed, so a reader never sees half of it).
  That file is the primary source of a job's exit code, because ``sacct`` needs the
  accounting daemon (slurmdbd) that many small clusters lack; ``squeue`` is only asked
  whether the job is still alive.
* The script traps SIGTERM and SIGINT with a no-op. Slurm signals every process of the
  job itself, and a batch shell that died first would end the job in Slurm's eyes
  while its command still ran (with ``proctrack/linuxproc``, an orphaned command is
  not even tracked any more: ``scancel`` could not reach it). Bash runs the no-op only
  once the command has ended; the command itself gets the default handlers.
* The job's variables are ``export``-ed by the script (shell-quoted) rather than passed
  with ``sbatch --export``. The rest of the job's environment is the trainer's, as
  ``sbatch --export=ALL`` (given explicitly: a site's ``SBATCH_EXPORT=NONE`` would leave
  the job without PATH) propagates it, minus the variables that describe the Slurm
  allocation or step the trainer itself may run in (`submission_env`): inherited, they
  would give the job another job's id, task count or CPU binding.
* With a lease (`lease_lines`), a watchdog in the background of the script cancels the
  job once the trainer has stopped renewing the lease file: the trainer was killed
  (SIGKILL, node failure) and no ``scancel`` of its own will ever come.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from melissa_trainer.launcher.backends.lease import DEFAULT_TIMEOUT, lease_lines

__all__ = [
    "JOB_PREFIX",
    "batch_script",
    "began_file",
    "check_extra_args",
    "exit_file",
    "job_name",
    "minutes_seconds_note",
    "normalize_time_limit",
    "srun_command",
    "study_prefix",
    "submission_env",
]

_TIME_LIMIT = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}")
#: sbatch's words for no time limit (as ``--time=0``), case aside
_NO_LIMIT = ("UNLIMITED", "INFINITE")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Exit-code file suffix; the job id is inserted by the script (``$SLURM_JOB_ID``).
EXIT_SUFFIX = ".exit"
#: Began-file suffix (`began_file`).
BEGAN_SUFFIX = ".began"
#: Every Slurm job name (and srun step name) of this library starts with it.
JOB_PREFIX = "mt-"
#: Variables left out of the submission environment: they describe the allocation or
#: step the trainer runs in (``SLURM_JOB_ID``, ``SLURM_NTASKS``, ``SLURM_CPUS_PER_TASK``,
#: ``SRUN_CPUS_PER_TASK``...), and sbatch, or the srun in the job, would take them as the
#: job's own. ``SLURM_CONF`` (which cluster to talk to) is kept.
ALLOCATION_PREFIXES = ("SLURM_", "SRUN_", "SALLOC_")
KEPT_SLURM_VARIABLES = frozenset({"SLURM_CONF"})


def job_name(name: str, study: str | None = None) -> str:
    """The Slurm name of job `name`: ``mt-<study>-<name>`` (``mt-<name>`` without a
    study), so that ``squeue --me -o '%i %j'`` shows which study a job belongs to and a
    restarted study finds the jobs of its previous run (`study_prefix`)."""
    return f"{study_prefix(study)}{name}" if study else f"{JOB_PREFIX}{name}"


def study_prefix(study: str) -> str:
    """The prefix of the names of every job of `study`."""
    return f"{JOB_PREFIX}{study}-"


def submission_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment sbatch runs with (and, through ``--export=ALL``, the job's base
    environment): `environ` without the variables of an enclosing allocation or step
    (`ALLOCATION_PREFIXES`, except `KEPT_SLURM_VARIABLES`). ``SBATCH_*`` variables (a
    user's defaults for sbatch, e.g. ``SBATCH_ACCOUNT``) are kept."""
    return {
        key: value
        for key, value in environ.items()
        if key in KEPT_SLURM_VARIABLES or not key.startswith(ALLOCATION_PREFIXES)
    }


def normalize_time_limit(value: int | str | None) -> str | None:
    """`time_limit` as ``sbatch --time`` expects it: minutes (an int) or a Slurm time
    string ("MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS"); None: none
    (the partition's DefaultTime). No limit, as Slurm spells it: 0 (int or string) or
    "UNLIMITED"/"INFINITE" (any case; given as "UNLIMITED"), each capped by the
    partition's MaxTime. Before, the int 0 was refused and the string "0" passed, and
    sbatch's own words for no limit were refused.

    Raises ValueError naming `time_limit` for anything else.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"time_limit must be minutes (int) or 'HH:MM:SS', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(
                f"time_limit must be >= 0 minutes (0: no limit, as Slurm reads it), got {value}"
            )
        return str(value)
    text = value.strip()
    if text.upper() in _NO_LIMIT:
        return "UNLIMITED"
    if not _TIME_LIMIT.fullmatch(text):
        raise ValueError(
            f"time_limit {value!r} is not a Slurm time: use minutes (int), 'HH:MM:SS', "
            "'D-HH:MM:SS' or 'UNLIMITED'"
        )
    return text


def minutes_seconds_note(text: str | None) -> str | None:
    """What to tell a user whose `time_limit` (normalized) has the form "A:B": Slurm
    reads it as minutes:seconds, where a reader of clocks sees hours:minutes ("01:30",
    meant as an hour and a half, is 90 seconds to Slurm: every simulation is then ended
    at its limit). A valid Slurm time, so not refused (a "10:00" meant as ten minutes
    is right): the reading in words, and how to write either; None for another form."""
    if text is None or "-" in text or text.count(":") != 1:
        return None
    minutes, seconds = (int(part) for part in text.split(":"))
    if seconds >= 60:  # (no clock reads it as hours:minutes)
        return None
    hours, rest = divmod(minutes, 60)
    read = f"{hours} h {rest} min {seconds} s" if hours else f"{minutes} min {seconds} s"
    return (
        f"SlurmBackend's time_limit {text!r} is minutes:seconds to Slurm: {read} per job, "
        f"not {minutes} h {seconds} min. For hours write 'HH:MM:SS' ('{text}:00'), or give "
        f"minutes as an int; if {read} is meant, '0:{text}' says so without this warning"
    )


def check_extra_args(name: str, args: Sequence[str]) -> tuple[str, ...]:
    """Validate `args` (the option `name`): a sequence of option strings, each one option
    such as ``"--mem=4G"``, none naming the job (``-J``/``--job-name``: it would come after
    the backend's own name, and win). Raises ValueError (or TypeError) naming `name`
    otherwise."""
    if isinstance(args, str | bytes):
        raise TypeError(f"{name} must be a sequence of options, e.g. ['--mem=4G'], not {args!r}")
    out = tuple(args)
    for arg in out:
        if not isinstance(arg, str) or not arg.startswith("-") or "\n" in arg or "\r" in arg:
            raise ValueError(
                f"{name}: each item must be one option starting with '-' (e.g. '--mem=4G'), "
                f"got {arg!r}"
            )
        if _names_the_job(arg):
            raise ValueError(
                f"{name}: {arg!r} names the job, but the backend names every job and step "
                "itself (job_name) and finds and cancels them by that name: leave it out"
            )
    return out


def _names_the_job(arg: str) -> bool:
    """Whether option `arg` is ``-J``/``--job-name`` (srun and sbatch take a long option's
    unambiguous abbreviation, down to ``--job-n``: ``--job`` is also ``--jobid``'s)."""
    if arg.startswith("-J"):
        return True
    option = arg.split("=", 1)[0].split(None, 1)[0]
    return len(option) >= len("--job-n") and "--job-name".startswith(option)


def _directive(option: str, value: str | int | None = None) -> str:
    """One ``#SBATCH`` line. sbatch splits these lines at blanks and knows only double
    quotes, so a value with blanks is double-quoted and one with a quote is refused."""
    if value is None:
        return f"#SBATCH {option}"
    text = str(value)
    if '"' in text or "\n" in text or "\r" in text:
        raise ValueError(f"#SBATCH {option}: the value {text!r} holds a quote or a newline")
    if any(c.isspace() for c in text):
        text = f'"{text}"'
    return f"#SBATCH {option}={text}"


def _output_pattern(path: str) -> str:
    """`path` for ``--output``: Slurm expands ``%x`` patterns there, so ``%`` is doubled."""
    return path.replace("%", "%%")


def exit_file(stem: str, job_id: str) -> str:
    """Where the script of a job writes its exit code (see `batch_script`)."""
    return f"{stem}.{job_id}{EXIT_SUFFIX}"


def began_file(stem: str, token: str) -> str:
    """Where the script of a job writes its job id as it begins, before its command (see
    `batch_script`); `token` is drawn for each launch, so that the file names one
    submission, not its job id (which a lost sbatch reply leaves unknown)."""
    return f"{stem}.{token}{BEGAN_SUFFIX}"


def batch_script(
    *,
    name: str,
    argv: Sequence[str],
    ranks: int,
    cwd: str,
    exit_stem: str,
    env: Mapping[str, str] | None = None,
    log_path: str | None = None,
    partition: str | None = None,
    time_limit: str | None = None,
    extra_args: Sequence[str] = (),
    srun_args: Sequence[str] = (),
    lease: str | None = None,
    lease_timeout: float = DEFAULT_TIMEOUT,
    began: str | None = None,
) -> str:
    """The text of the batch script of one job.

    Args:
        name: the Slurm job name (``--job-name``).
        argv: the command of one rank (run directly if `ranks` == 1, else under srun).
        ranks: ``--ntasks``.
        cwd: absolute directory the command runs in.
        exit_stem: the exit code goes to ``exit_file(exit_stem, $SLURM_JOB_ID)``.
        env: variables exported before the command.
        log_path: ``--output`` (stdout and stderr, appended: a restart adds to the
            same log); None: Slurm's default ``slurm-%j.out`` in the working directory.
        partition, time_limit: ``--partition`` / ``--time`` if given (time_limit as
            returned by `normalize_time_limit`).
        extra_args: more sbatch options, one ``#SBATCH`` line each.
        srun_args: options of the ``srun`` that runs a job of several ranks (e.g.
            ``--mpi=pmi2``).
        lease, lease_timeout: the lease file and its timeout in seconds (`lease_lines`);
            None: no lease, the job runs until it ends or is cancelled.
        began: the `began_file` the script writes ``$SLURM_JOB_ID`` to (aside, then
            renamed) before anything else: this submission reached the controller, and
            the command may have run. If it cannot be written the script says so in its
            log and runs on (as without a lease file). None: no such file.

    Raises ValueError for an empty command, ranks < 1, a variable name that is not a
    shell identifier, or an option value sbatch could not read back.
    """
    if not argv:
        raise ValueError(f"job {name!r}: empty command")
    if ranks < 1:
        raise ValueError(f"job {name!r}: ranks must be >= 1, got {ranks}")
    lines = ["#!/bin/bash", _directive("--job-name", name)]
    if log_path is not None:
        lines += [_directive("--output", _output_pattern(log_path)), "#SBATCH --open-mode=append"]
    lines.append(_directive("--ntasks", ranks))
    if partition is not None:
        lines.append(_directive("--partition", partition))
    if time_limit is not None:
        lines.append(_directive("--time", time_limit))
    lines += [_directive(arg) for arg in check_extra_args("extra_args", extra_args)]
    lines.append(f"# Written by melissa-trainer for job {name}; rewritten at each launch.")
    for key, value in (env or {}).items():
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"job {name!r}: environment variable name {key!r} is not valid")
        lines.append(f"export {key}={shlex.quote(str(value))}")
    command = shlex.join(argv)
    if ranks > 1:
        srun = ["srun", f"--ntasks={ranks}", "--kill-on-bad-exit=1"]
        srun += check_extra_args("srun_args", srun_args)
        command = f"{shlex.join(srun)} {command}"
    target = shlex.quote(f"{exit_stem}.") + '"$SLURM_JOB_ID"' + shlex.quote(EXIT_SUFFIX)
    lines.append("trap : TERM INT  # outlive the command: Slurm signals it directly")
    if began is not None:  # first: the trainer must not submit a job that began again
        said = (
            f"melissa-trainer: cannot write {began}, which the trainer reads if sbatch's "
            "reply was lost: it may submit this job again"
        )
        lines.append(
            f'printf "%s\\n" "$SLURM_JOB_ID" > {shlex.quote(began + ".tmp")} && mv -f -- '
            f"{shlex.quote(began + '.tmp')} {shlex.quote(began)} || echo {shlex.quote(said)} >&2"
        )
    if lease is not None:
        lines += lease_lines(lease, lease_timeout)
    lines += [
        f"cd -- {shlex.quote(cwd)} && {command}",
        "code=$?",
        f'printf "%s\\n" "$code" > {target}.tmp && mv -f -- {target}.tmp {target}',
        'exit "$code"',
        "",
    ]
    if lease is not None:  # the command has ended: the watchdog's work too
        lines.insert(-3, 'kill "$watchdog" 2>/dev/null')
    return "\n".join(lines)


def srun_command(
    *,
    name: str,
    argv: Sequence[str],
    ranks: int,
    time_limit: str | None = None,
    srun_args: Sequence[str] = (),
    srun: str = "srun",
) -> list[str]:
    """A job step inside the current allocation: `ranks` tasks on CPUs no other step
    uses (``--exclusive``), named `name` (so that it can be found and cancelled). One
    task: ``--nodes=1``, where srun would otherwise take the allocation's node count from
    the trainer's ``SLURM_NNODES`` and write "srun: Warning: can't run 1 processes on 2
    nodes, setting nnodes to 1" into every job's log (a two-node allocation; a user
    trial, tests/launcher/backends/test_slurm_srun_two_nodes.py). Several: Slurm's
    choice, as asked (`srun_args` may name ``--nodes``)."""
    if not argv:
        raise ValueError(f"job {name!r}: empty command")
    if ranks < 1:
        raise ValueError(f"job {name!r}: ranks must be >= 1, got {ranks}")
    command = [srun, f"--ntasks={ranks}", "--exclusive", f"--job-name={name}"]
    if ranks == 1:
        command.append("--nodes=1")
    if ranks > 1:
        command.append("--kill-on-bad-exit=1")
    if time_limit is not None:
        command.append(f"--time={time_limit}")
    command += check_extra_args("srun_args", srun_args)
    return [*command, *argv]
