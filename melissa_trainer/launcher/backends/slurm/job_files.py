"""The files a batch job shares with `batch.BatchJobs` in its directory (`script_dir`,
else its log's or its working directory), and what an earlier run left of them.

* The exit file (`script.exit_file`, ``mt-<study>-sim-3.<job id>.exit``): the code the
  script writes when its command ends. The run that sees the job end reads and removes
  it (`take_exit_file`).
* The began file (`script.began_file`, ``mt-<study>-sim-3.<token>.began``): the job id
  the script writes as it begins, before its command; the token is drawn for each
  launch. After an sbatch whose reply was lost, it tells that the submission went
  through even once the job has ended and left squeue's list (`read_began`,
  `commands.SlurmCommands.sbatch`: a frozen controller whose backlog ran a short job
  before squeue answered again; failed before: the job was submitted again, its
  simulation ran twice). Removed once the job's end is seen (`drop`).
* The lease (`lease`): one per run of the trainer.

A job that ends with no poller (cancelled by `begin_study` or by its lease, ended while
no trainer ran) leaves its files behind: the first launch of the study's next run into
the directory removes them (`drop_old_files`, `drop_old_leases`), the files of this
run's jobs and of other studies left alone (they are named after the study).
"""

from __future__ import annotations

import logging
from collections.abc import Container
from pathlib import Path

from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss

__all__ = ["drop", "drop_old_files", "drop_old_leases", "read_began", "take_exit_file"]

logger = logging.getLogger("melissa_trainer.launcher.backends.slurm")


def take_exit_file(path: Path, what: str) -> str | None:
    """The text of the exit file `path` of job `what`, stripped, which is then removed;
    None if there is none (or it is empty, or cannot be read: logged)."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read the exit code of %s: %s", what, exc)
        return None
    if not text:
        return None
    path.unlink(missing_ok=True)
    return text


def read_began(path: Path) -> str | None:
    """The job id in the began file `path`, None while there is none (the job has not
    begun, or never reached the controller). A file that cannot be read or holds no job
    id is logged and counts as none."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read %s (whether a job began): %s", path, exc)
        return None
    try:
        return sq.parse_sbatch(text)
    except ValueError:
        logger.warning("%s holds %r, not a job id", path, text)
        return None


def drop(path: Path, what: str) -> None:
    """Remove `path`, the `what` file of a job that ended; a failure is logged."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        logger.warning("cannot remove %s, the %s file of a job that ended: %s", path, what, exc)


def drop_old_files(directory: Path, prefix: str, live: Container[str]) -> None:
    """Remove the exit files and began files (and half-written ``.tmp`` ones) of the
    jobs of the study whose job names start with `prefix` in `directory`, but the exit
    files of the jobs in `live` (this run's: stale jobs `begin_study` could not end yet).
    Called before this run's first launch into `directory`: its began files are all an
    earlier run's. A file that cannot be removed is logged and left."""
    for suffix in (ss.EXIT_SUFFIX, ss.BEGAN_SUFFIX):
        for old in directory.glob(f"{prefix}*{suffix}*"):
            name = old.name.removesuffix(".tmp")
            if not name.endswith(suffix):
                continue  # (a name that only contains the suffix)
            job_id = name.removesuffix(suffix).rpartition(".")[2]
            if suffix == ss.EXIT_SUFFIX and job_id in live:
                continue
            logger.debug("removing a file of an earlier run's job: %s", old)
            try:
                old.unlink(missing_ok=True)
            except OSError as exc:
                logger.warning("cannot remove %s, an earlier run's file: %s", old, exc)


def drop_old_leases(lease: Path, prefix: str) -> None:
    """Remove the lease files of earlier runs of the study (`prefix`) beside `lease`:
    jobs of theirs still running (if `begin_study` could not cancel them) cancel
    themselves after the timeout."""
    for old in lease.parent.glob(f"{prefix}*.lease"):
        if old != lease:
            logger.debug("removing the lease of an earlier run: %s", old)
            old.unlink(missing_ok=True)
