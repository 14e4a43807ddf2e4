"""A local job's process group: signal it, list its live members, wait for them to end
(`local.LocalBackend`'s kills and clean-up; Linux's /proc for the members, none
elsewhere)."""

from __future__ import annotations

import logging
import os
import sys
import time

__all__ = ["group_members", "signal_group", "wait_group_gone"]

logger = logging.getLogger("melissa_trainer.launcher")


def signal_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False if it no longer exists (which is fine)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - the id was reused by someone else's group
        return False
    return True


def wait_group_gone(pgid: int, timeout: float) -> None:
    """Wait (Linux; bounded) until no live process is left in group `pgid`, so that a
    killed job is really gone when `kill` returns. SIGKILL is not instantaneous: a
    process may still be exiting when the signal call returns. Zombies count as gone."""
    if not sys.platform.startswith("linux"):
        return
    deadline = time.monotonic() + timeout
    while group_members(pgid):
        if time.monotonic() >= deadline:
            logger.warning("processes %s of a killed job are still alive", group_members(pgid))
            return
        time.sleep(0.005)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group `pgid`, from /proc ([] off Linux)."""
    if not sys.platform.startswith("linux"):
        return []
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
        except OSError:  # the process ended meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry.name))
    return members
