"""The output-directory locks this process holds (`output_lock.OutputDirLock`), by file
and by host lock, under one lock: a second trainer of this process on a directory is
found there (flock emulated on NFS would not refuse it); and the file helpers the lock
shares with the fork handler (`same_file`, `close_quietly`).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.output_lock import OutputDirLock

__all__ = ["close_quietly", "held_files", "held_hosts", "registry_lock", "same_file"]

# (the words of `close_quietly`, as before its move: output_lock's logger)
logger = logging.getLogger("melissa_trainer.trainer.output_lock")

# (st_dev, st_ino) of the lock files this process holds, and their holder: flock
# emulated by POSIX locks (NFS) does not refuse a second lock by the same process, and
# closing any descriptor of the file there would drop the process's lock, so a second
# taker in this process is refused without opening the file.
held_files: dict[tuple[int, int], OutputDirLock] = {}
# the host locks this process holds (`host_lock.host_key`), and their holder: a second
# trainer of this process on the path finds the first even once the file is gone
held_hosts: dict[bytes, OutputDirLock] = {}
registry_lock = threading.Lock()


def same_file(path: Path, key: tuple[int, int]) -> bool:
    """Whether `path` still names the file whose (st_dev, st_ino) is `key`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == key


def close_quietly(fd: int) -> None:
    """Close `fd` on an error path, where the error being raised is the one to report."""
    try:
        os.close(fd)
    except OSError as exc:
        logger.debug("closing the lock file after an error: %s", exc)
