"""The job logs of a study: where each job's output goes, and what a fresh study does
with an earlier run's.

Each job's output (stdout and stderr) goes to ``{log_dir}/sim-{id}.log`` (worker mode:
``worker-{slot}.log``), appended to by its restarts; ``log_dir`` is the `Launcher`'s, or
``{study_dir}/logs``. A study that starts afresh (not resumed) first moves the job logs
an earlier run left there to ``{log_dir}/previous-TIME/`` (`set_aside_earlier_logs`),
so that what a failure report quotes of a log (its last lines, which blame the solver or
the sampler) is this run's. A resumed study appends to its own.

One study per log folder: a launcher holds an exclusive ``flock`` on the folder itself
(`LogDirHold`: no file added, the folder holds the jobs' logs only) from its start to its
stop, taken before it sets anything aside. Without it a second study given the same
``log_dir`` (two users of one script in one directory, each with an ``--output_dir`` of
their own) would move the first one's running jobs' logs aside as an earlier run's, and
write its own ``sim-{id}.log`` where the first one's reports read theirs. The kernel
releases the lock when its process dies (``kill -9`` too), so a resume is never refused
by a dead study. A file system that refuses the lock (NFS's emulated flock wants a file
open for writing; Lustre's ``noflock``) runs without it.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import time
from pathlib import Path

from melissa_trainer.config.reading import ConfigError

__all__ = ["LogDirHold", "set_aside_earlier_logs", "take_log_dir"]

logger = logging.getLogger(__name__)

#: a lock the file system refuses on a folder (NFS, Lustre ``noflock``): none is taken
_NO_LOCKS = (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EBADF, errno.EINVAL)


class LogDirHold:
    """An exclusive ``flock`` on the folder `log_dir`, held until `release` (or the
    process's end). Thread-safety: made and released by the launcher's owner."""

    def __init__(self, log_dir: Path) -> None:
        """Take the lock, or refuse.

        Raises:
            ConfigError: another launcher (alive: in this process or another) holds
                it; names the folder and the fixes.
        """
        self._fd: int | None = os.open(log_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self.release()
            if exc.errno in _NO_LOCKS:
                return
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise ConfigError(
                f"log_dir {str(log_dir)!r} is in use by another study's launcher, "
                f"alive: two studies writing one folder's sim-*.log would mix their "
                f"jobs' logs. Give this Launcher another log_dir, or none (its logs then "
                f"go to the study's own folder, {{output_dir}}/study/logs), or wait for "
                f"that study to end"
            ) from exc

    def release(self) -> None:
        """Let the lock go (closing the folder). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        # a launcher dropped without `stop` (its `start` failed after the lock, say)
        # must not keep its folder locked until the process ends
        self.release()


def set_aside_earlier_logs(log_dir: Path) -> Path | None:
    """Move the job logs (``sim-*.log``, ``worker-*.log``) in `log_dir` to a new
    ``previous-YYYYmmddTHHMMSSZ`` folder in it (nothing is deleted), and return it;
    None if there are none. Without it a fresh run's jobs append to an earlier run's
    logs, and a report quoting a log's last lines quotes that run's when the new
    attempt printed nothing (a killed or silent solver): another run's error, blamed on
    this one."""
    earlier = sorted([*log_dir.glob("sim-*.log"), *log_dir.glob("worker-*.log")])
    if not earlier:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, n = log_dir / f"previous-{stamp}", 1
    while target.exists():
        n += 1
        target = log_dir / f"previous-{stamp}-{n}"
    target.mkdir()
    for path in earlier:
        path.rename(target / path.name)
    return target


def take_log_dir(log_dir: Path, resumed: bool) -> LogDirHold:
    """`log_dir` made and held for one study (`LogDirHold`, taken before anything is
    moved), an earlier run's job logs set aside unless `resumed` (a resumed study
    appends to its own). Raises `LogDirHold`'s ConfigError."""
    log_dir.mkdir(parents=True, exist_ok=True)
    hold = LogDirHold(log_dir)
    if not resumed:
        earlier = set_aside_earlier_logs(log_dir)
        if earlier is not None:
            logger.info("the job logs of an earlier run were moved to %s", earlier)
    return hold
