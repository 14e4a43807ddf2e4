"""What Slurm says of a job, as pure functions (tested without Slurm): the ``sbatch``,
``squeue``, ``sacct``, ``scontrol`` and ``scancel`` command lines, the parsers of their
output, the job states that mean ended or started, and the exit code a final state
stands for. Nothing here runs a process. `SlurmBackend` runs them (`commands`); the
batch script a job runs is `script`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

__all__ = [
    "STARTED_STATES",
    "TERMINAL_STATES",
    "exit_code",
    "own_jobs_command",
    "parse_own_jobs",
    "parse_sacct",
    "parse_sbatch",
    "parse_scontrol",
    "parse_squeue",
    "parse_squeue_nodes",
    "parse_squeue_reasons",
    "parse_squeue_starts",
    "sacct_command",
    "sbatch_command",
    "scancel_command",
    "scontrol_command",
    "squeue_command",
]

#: Job states after which no process of the job runs any more (``squeue %T`` spelling).
#: Any other state (PENDING, RUNNING, COMPLETING: processes still being ended...) counts
#: as alive.
TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)

#: Job states whose processes run (or ran): a job in any other live state (PENDING,
#: CONFIGURING while its nodes boot, REQUEUED, SUSPENDED...) is waiting, not silent.
STARTED_STATES = frozenset({"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"}) | TERMINAL_STATES

_JOB_ID = re.compile(r"\d+(_\d+)?")


def sbatch_command(script_path: str, sbatch: str = "sbatch") -> list[str]:
    """Submit a script; ``--parsable`` prints ``ID`` or ``ID;cluster``. ``--export=ALL``
    overrides a site's or user's ``SBATCH_EXPORT`` (see `submission_env`)."""
    return [sbatch, "--parsable", "--export=ALL", script_path]


def parse_sbatch(stdout: str) -> str:
    """The job id in ``sbatch --parsable`` output; ValueError if there is none."""
    lines = [line for line in stdout.strip().splitlines() if line.strip()]
    job_id = lines[-1].split(";", 1)[0].strip() if lines else ""
    if not _JOB_ID.fullmatch(job_id):
        raise ValueError(f"sbatch printed no job id: {stdout!r}")
    return job_id


def squeue_command(job_ids: Iterable[str], squeue: str = "squeue") -> list[str]:
    """States of the given jobs, finished ones included while Slurm remembers them
    (``MinJobAge``), with the reason a pending one waits (``%r``: Resources, Priority,
    BeginTime, JobHeldUser...), the nodes a started one runs or ran on (``%N``, a
    hostlist: ``n1``, ``n[1-3]``) and its start time (``%S``: for a pending one, when
    Slurm expects to start it, if it knows); unknown ids are left out of the output (no
    error)."""
    return [squeue, "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T|%r|%N|%S"]


def own_jobs_command(squeue: str = "squeue", uid: int | None = None) -> list[str]:
    """This user's jobs still queued, running or ending, as ``ID|STATE|NAME`` lines."""
    user = str(os.getuid() if uid is None else uid)
    return [squeue, "-h", "-u", user, "-o", "%i|%T|%j"]


def parse_own_jobs(stdout: str) -> list[tuple[str, str, str]]:
    """(job id, state, name) from `own_jobs_command` output (a name may hold ``|``)."""
    jobs = []
    for line in stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and parts[0]:
            jobs.append((parts[0], parts[1].strip(), parts[2]))
    return jobs


def parse_squeue(stdout: str) -> dict[str, str]:
    """Job id -> state from `squeue_command` output (array tasks keep their ``ID_N``);
    also reads ``ID|VALUE`` lines (a step's name, for one)."""
    states: dict[str, str] = {}
    for line in stdout.splitlines():
        job_id, sep, rest = line.strip().partition("|")
        state = rest.partition("|")[0].strip()
        if sep and job_id:
            states[job_id] = state.split()[0] if state else ""
    return states


def parse_squeue_reasons(stdout: str) -> dict[str, str]:
    """Job id -> why Slurm keeps it pending, from `squeue_command` output: its ``%r``
    when the job is PENDING and Slurm gives one (not ``None``), else left out."""
    reasons: dict[str, str] = {}
    for line in stdout.splitlines():
        job_id, _, rest = line.strip().partition("|")
        state, _, rest = rest.partition("|")
        reason = rest.partition("|")[0].strip()
        if job_id and state.strip() == "PENDING" and reason not in ("", "None"):
            reasons[job_id] = reason
    return reasons


def parse_squeue_nodes(stdout: str) -> dict[str, str]:
    """Job id -> the nodes it runs or ran on (squeue's ``%N``, a hostlist as Slurm
    writes it), from `squeue_command` output; a job with none (pending: ``""`` or
    ``(null)``) is left out."""
    nodes: dict[str, str] = {}
    for line in stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 4 and parts[0] and parts[3].strip() not in ("", "(null)"):
            nodes[parts[0]] = parts[3].strip()
    return nodes


def parse_squeue_starts(stdout: str) -> dict[str, str]:
    """Job id -> when Slurm expects to start it (squeue's ``%S``, ``2026-12-05T23:25:37``),
    from `squeue_command` output, for a PENDING job whose start Slurm knows (a requeued
    job's BeginTime, a backfill estimate); the others (``N/A``, ``Unknown``) left out."""
    starts: dict[str, str] = {}
    for line in stdout.splitlines():
        parts = [part.strip() for part in line.strip().split("|")]
        if len(parts) >= 5 and parts[0] and parts[1] == "PENDING" and parts[4][:1].isdigit():
            starts[parts[0]] = parts[4]
    return starts


def sacct_command(job_id: str, sacct: str = "sacct") -> list[str]:
    """Final state and exit code of a job from accounting (needs slurmdbd)."""
    return [sacct, "-j", job_id, "-n", "-X", "-P", "-o", "State,ExitCode"]


def parse_sacct(stdout: str) -> tuple[str, str] | None:
    """(state, "code:signal") from `sacct_command` output, or None if it has no line.

    sacct writes e.g. ``CANCELLED by 0|0:15``; only the state's first word is kept.
    """
    for line in stdout.splitlines():
        state, sep, code = line.strip().partition("|")
        if sep and state:
            return state.split()[0], code.strip()
    return None


def scontrol_command(job_id: str, scontrol: str = "scontrol") -> list[str]:
    """The controller's record of a job (kept ``MinJobAge`` s after it ends), one line."""
    return [scontrol, "show", "job", "-o", job_id]


def parse_scontrol(stdout: str) -> tuple[str, str] | None:
    """(state, "code:signal") from `scontrol_command` output, or None."""
    fields = dict(
        token.split("=", 1)
        for token in stdout.split()
        if "=" in token and not token.startswith("=")
    )
    if "JobState" not in fields:
        return None
    return fields["JobState"], fields.get("ExitCode", "")


def exit_code(state: str, code: str = "") -> int:
    """An exit code from a final job state and Slurm's ``ExitCode`` ("code:signal").

    COMPLETED -> 0. Otherwise non-zero: 128 + the signal if one killed the job (as a
    shell reports it), else the exit code, else 1 (e.g. a job cancelled while queued
    that never started). A started job's cancellation with no signal in its code, a
    requeued job cancelled while pending included, is read as 143 before this
    (`exit_code.final_code`: `exit_code.CANCELLED_CODE`), not 1.
    """
    if state == "COMPLETED":
        return 0
    status, _, signal = code.partition(":")
    try:
        status_value, signal_value = int(status or 0), int(signal or 0)
    except ValueError:
        return 1
    if signal_value:
        return 128 + signal_value
    return status_value or 1


def scancel_command(
    job_ids: Iterable[str], *, signal: str | None = None, scancel: str = "scancel"
) -> list[str]:
    """Without `signal`: cancel the jobs (Slurm sends SIGTERM to their processes, then
    SIGKILL after its ``KillWait``; a pending job just leaves the queue). With `signal`
    (e.g. "TERM", "KILL"): send it to every process of the running jobs, batch shell
    included, without cancelling them (Slurm refuses to signal a job already
    cancelled, which is why a polite kill signals first and cancels last)."""
    options = [] if signal is None else ["--full", f"--signal={signal}"]
    return [scancel, *options, *job_ids]
