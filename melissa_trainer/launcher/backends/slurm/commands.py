"""Running Slurm's client commands (sbatch, squeue, scancel, sacct...) for `SlurmBackend`.

The executables are looked up on PATH once, when the backend is made, so that a
machine without Slurm fails before anything starts. Each command runs with a timeout
(a busy or unreachable controller makes them retry for a long time), without stdin,
and never raises: a failure is returned, for the caller to log and decide.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import Literal, cast

from melissa_trainer.launcher.backends.base import LaunchError
from melissa_trainer.launcher.backends.slurm import queries as sq

__all__ = [
    "COMMAND_TIMEOUT",
    "CONTROLLER_WAIT",
    "Result",
    "WAIT",
    "SlurmCommands",
    "Wait",
    "ambiguous",
    "check_controller_wait",
    "failure",
    "transient",
]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: seconds a Slurm client command may take before it counts as failed
COMMAND_TIMEOUT = 30.0

#: what `SlurmCommands.run` returns: the finished command, or why it could not run
Result = subprocess.CompletedProcess[str] | str


class Wait(Enum):
    """What a `SlurmCommands.run_retrying` `before_retry` returns to wait on without
    running the command again (`WAIT`)."""

    WAIT = "wait"


#: see `Wait`
WAIT: Literal[Wait.WAIT] = Wait.WAIT

#: seconds a command that cannot reach the Slurm controller is retried by default: a
#: controller restart (an upgrade, a configuration change, a fail-over) takes a minute
CONTROLLER_WAIT = 300.0
#: what Slurm's client commands say when the controller could not be reached or asked
#: them to try again (lower case): transient, retried for `controller_wait` seconds;
#: any other refusal (an invalid partition, a bad option) is final at once
TRANSIENT = (
    "unable to contact slurm controller",
    "socket timed out on send/recv",
    "zero bytes were transmitted or received",
    "communication connection failure",
    "connection refused",
    "connection timed out",
    "slurm temporarily unable to accept job",
    "resource temporarily unavailable",
    "backup controller in standby mode",
    "timed out after",  # (the command's own timeout: `SlurmCommands.run`)
)
#: of those, the ones after which a request may have reached the controller (a lost
#: reply): a job may have been submitted (`SlurmCommands.sbatch` looks before submitting again)
AMBIGUOUS = ("socket timed out", "zero bytes were transmitted", "timed out after")


def transient(why: str) -> bool:
    """Whether a command's failure `why` is the controller's unreachability or its "try
    again" (`TRANSIENT`), not a refusal."""
    low = why.lower()
    return any(words in low for words in TRANSIENT)


def ambiguous(why: str) -> bool:
    """Whether the failure `why` may have reached the controller (`AMBIGUOUS`)."""
    low = why.lower()
    return any(words in low for words in AMBIGUOUS)


def check_controller_wait(value: float) -> float:
    """`value` as seconds, or ValueError naming ``controller_wait``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e9:
        raise ValueError(
            "controller_wait must be a number of seconds >= 0 (how long a Slurm command "
            f"that cannot reach the controller is retried; 0: never), got {value!r}"
        )
    return float(value)


def failure(result: Result) -> str | None:
    """Why `result` failed (its stderr, or why it could not run), or None if it exited 0."""
    if isinstance(result, str):
        return result
    if result.returncode != 0:
        return result.stderr.strip() or result.stdout.strip() or f"exit {result.returncode}"
    return None


class SlurmCommands:
    """The Slurm client commands of one backend.

    Args:
        needed: commands that must be on PATH (LaunchError naming the missing ones and
            the fix otherwise).
        optional: commands used when present (e.g. sacct, scontrol).
        owner: how the error message names the backend.
        controller_wait: seconds a command failing to reach the controller is retried
            (`run_retrying`).

    Attributes:
        clock, sleep: the monotonic clock and the sleep of the retries (`time`'s; a test
            gives fakes, to count the seconds an outage holds a caller without waiting
            them).
        unreachable: the last command run could not reach the controller.

    Stateless once made but for `unreachable` (a hint: the last command's outcome).
    """

    def __init__(
        self,
        needed: Sequence[str],
        optional: Sequence[str],
        owner: str,
        controller_wait: float = CONTROLLER_WAIT,
    ) -> None:
        self.controller_wait = check_controller_wait(controller_wait)
        self.clock: Callable[[], float] = time.monotonic
        #: the last command run failed to reach the controller (`transient`)
        self.unreachable = False
        self.sleep: Callable[[float], None] = time.sleep
        found = {command: shutil.which(command) for command in (*needed, *optional)}
        missing = [command for command in needed if found[command] is None]
        if missing:
            raise LaunchError(
                f"{owner} needs {', '.join(missing)} on PATH: run the trainer on a Slurm "
                "login or compute node (Debian: apt-get install slurm-client), or choose "
                "backend='local' or 'mpiexec'"
            )
        self._found = found

    def has(self, name: str) -> bool:
        """`name` was found on PATH."""
        return self._found.get(name) is not None

    def path(self, name: str) -> str:
        """The executable of `name` (its bare name if it was not found)."""
        return self._found.get(name) or name

    def run(
        self,
        argv: list[str],
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = COMMAND_TIMEOUT,
    ) -> Result:
        """Run a command (blocks up to `timeout` s, COMMAND_TIMEOUT by default); see
        `Result`. Sets `unreachable`."""
        result: Result
        try:
            result = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                cwd=cwd,
                env=env,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            result = f"{argv[0]}: {exc}"
        why = failure(result)
        self.unreachable = why is not None and transient(why)
        return result

    def spent(self, until: float) -> bool:
        """Whether the wait that ends at `until` is over and the controller did not
        answer the last command: the commands sharing that wait are not worth another
        try (each would wait out its own timeout, MessageTimeout for a frozen one)."""
        return self.unreachable and self.clock() >= until

    def deadline(self) -> float:
        """The `clock` time `controller_wait` seconds from now: the end of the retries of
        the commands that share it (`run_retrying`'s `until`)."""
        return self.clock() + self.controller_wait

    def run_retrying(
        self,
        argv: list[str],
        cwd: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        before_retry: Callable[[str], Result | Wait | None] | None = None,
        until: float | None = None,
    ) -> tuple[Result, str]:
        """`run`, retried with backoff (1 s, doubling to 15 s) while it fails for a
        `transient` reason, until the `clock` reaches `until` (default: `deadline()`,
        `controller_wait` seconds from now; several commands given one `until` share
        that budget): a controller restart is ridden out. Logged as a summary: one
        WARNING at the first failure, one when the controller answers again or the wait
        is over (never a line per try). Returns the last result and, when the wait ran
        out on a transient failure, words for the caller's error ("" otherwise).

        `before_retry(why)` (may be None) runs before each retry, `why` the last
        failure: a result it returns is taken as the command's (a job found submitted);
        `WAIT`: do not run the command this time, wait on (the controller cannot yet
        tell whether an earlier try went through); None: run it again."""
        started = self.clock()
        until = started + self.controller_wait if until is None else until
        delay, tries, answer = 1.0, 1, ""
        name = os.path.basename(argv[0])
        result = self.run(argv, cwd=cwd, env=env)
        why = failure(result)
        while why is not None and transient(why):
            left = until - self.clock()
            if left <= 0:
                break
            if delay == 1.0:  # (the first failure)
                logger.warning(
                    "%s could not reach the Slurm controller (%s): retrying for up to %g s "
                    "(controller_wait)",
                    name,
                    why.splitlines()[-1],
                    round(until - started, 1),
                )
            self.sleep(min(delay, left))
            delay = min(2 * delay, 15.0)
            found = before_retry(why) if before_retry is not None else None
            if found is WAIT:
                continue
            if found is not None:
                result, why = cast("Result", found), None
                answer = "; the job of a try it had not answered was found (queued or begun)"
                break
            result = self.run(argv, cwd=cwd, env=env)
            tries += 1
            why = failure(result)
        waited = self.clock() - started
        if delay > 1.0 and (why is None or not transient(why)):
            logger.warning(
                "the Slurm controller answered %s again after %.0f s (%d tries%s)",
                name,
                waited,
                tries,
                answer,
            )
        if why is not None and transient(why) and delay > 1.0:  # (retried, in vain)
            note = (
                f" (the Slurm controller was unreachable for {waited:.0f} s, {tries} tries; "
                "controller_wait sets how long a command is retried)"
            )
            logger.warning("%s gave up after %.0f s (%d tries)", name, waited, tries)
            return result, note
        return result, ""

    def sbatch(
        self,
        script: str,
        name: str,
        cwd: str | os.PathLike[str],
        env: dict[str, str],
        began: Callable[[], str | None] | None = None,
    ) -> tuple[Result, str]:
        """Submit batch script `script` (job `name`) with ``sbatch --parsable``,
        retried while the controller is unreachable (`run_retrying`).

        Never a job twice: after a failure that may have reached the controller
        (`ambiguous`: a lost reply, or a controller that took the request and froze
        before answering, whose backlog it processes when it resumes), sbatch runs again
        only once it is known that no try was submitted: squeue has answered without a
        job `name` (one listed is the answer), and then `began()` still says no job of
        the script began (a job id: the answer). `began` reads the file the script
        writes as it begins (`script.began_file`): a try's job that ran and ended before
        squeue answered is no longer listed, and only its file tells. It is read after
        squeue's answer, since the job may begin and end while squeue is asked; a job
        gone from squeue's list without that file never ran its command (cancelled in
        the queue), and submitting again runs it once. While squeue cannot answer
        either, nothing is submitted: the controller cannot yet tell whether the earlier
        try went through."""
        argv = sq.sbatch_command(script, self.path("sbatch"))
        unsure = False  # a try may have reached the controller: look before sbatch

        def submitted(why: str) -> Result | Wait | None:
            nonlocal unsure
            unsure = unsure or ambiguous(why)
            if not unsure:
                return None
            job_id = None if began is None else began()
            if job_id is None:
                jobs = self.own_jobs()
                if isinstance(jobs, str):
                    return WAIT
                found = [job_id for job_id, _, job_name in jobs if job_name == name]
                job_id = found[0] if found else None if began is None else began()
            if job_id is None:
                unsure = False
                return None
            return subprocess.CompletedProcess(argv, 0, f"{job_id}\n", "")

        return self.run_retrying(argv, cwd=cwd, env=env, before_retry=submitted)

    def scancel(
        self, job_ids: Iterable[str], signal: str | None = None, until: float | None = None
    ) -> None:
        """``scancel`` (see `script.scancel_command`), retried while the controller is
        unreachable (`run_retrying`) until the `clock` reaches `until` (default:
        `controller_wait` from now; the scancels of one kill or close share one, so an
        outage holds it `controller_wait` s at most); a failure is only logged at debug
        level: scancel also fails for a job that ended meanwhile."""
        job_ids = list(job_ids)
        if not job_ids:
            return
        command = sq.scancel_command(job_ids, signal=signal, scancel=self.path("scancel"))
        why = failure(self.run_retrying(command, until=until)[0])
        if why is not None:
            logger.debug("%s: %s", " ".join(command), why)

    def own_jobs(self) -> list[tuple[str, str, str]] | str:
        """This user's jobs still known to squeue as (id, state, name), or why squeue
        failed."""
        result = self.run(sq.own_jobs_command(self.path("squeue")))
        why = failure(result)
        if why is not None or isinstance(result, str):
            return why or "squeue failed"
        return sq.parse_own_jobs(result.stdout)

    def partitions(self) -> list[str] | None:
        """The partitions `sinfo` lists, the default one marked with Slurm's ``*``, in
        its order; None if sinfo is missing or failed (only a hint depends on it)."""
        if not self.has("sinfo"):
            return None
        result = self.run([self.path("sinfo"), "-h", "-o", "%P"])
        if failure(result) is not None or isinstance(result, str):
            return None
        return list(
            dict.fromkeys(line.strip() for line in result.stdout.splitlines() if line.strip())
        )

    def record(self, job_id: str) -> tuple[str, str] | None:
        """(state, "code:signal") from sacct, else scontrol; None if neither knows."""
        for name, command, parse in (
            ("sacct", sq.sacct_command, sq.parse_sacct),
            ("scontrol", sq.scontrol_command, sq.parse_scontrol),
        ):
            if not self.has(name):
                continue
            result = self.run(command(job_id, self.path(name)))
            if not isinstance(result, str) and result.returncode == 0:
                record = parse(result.stdout)
                if record is not None and record[0] in sq.TERMINAL_STATES:
                    return record
        return None
