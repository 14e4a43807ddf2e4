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
from collections.abc import Iterable, Sequence

from melissa_trainer.launcher.backends.base import LaunchError
from melissa_trainer.launcher.backends.slurm import queries as sq

__all__ = ["COMMAND_TIMEOUT", "Result", "SlurmCommands", "failure"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")

#: seconds a Slurm client command may take before it counts as failed
COMMAND_TIMEOUT = 30.0

#: what `SlurmCommands.run` returns: the finished command, or why it could not run
Result = subprocess.CompletedProcess[str] | str


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

    Stateless once made: safe from any thread.
    """

    def __init__(self, needed: Sequence[str], optional: Sequence[str], owner: str) -> None:
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
    ) -> Result:
        """Run a command (blocks up to COMMAND_TIMEOUT s); see `Result`."""
        try:
            return subprocess.run(
                argv,
                capture_output=True,
                text=True,
                cwd=cwd,
                env=env,
                timeout=COMMAND_TIMEOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{argv[0]}: {exc}"

    def scancel(self, job_ids: Iterable[str], signal: str | None = None) -> None:
        """``scancel`` (see `script.scancel_command`); a failure is only logged at
        debug level: scancel also fails for a job that ended meanwhile."""
        job_ids = list(job_ids)
        if not job_ids:
            return
        command = sq.scancel_command(job_ids, signal=signal, scancel=self.path("scancel"))
        why = failure(self.run(command))
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
