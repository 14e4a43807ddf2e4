"""Which live processes hold a file open or map it, read from /proc (Linux), and
whether those are dying or were started with a job's mark in their environment: what
`mpich_segments` asks before it removes a file that no job of ours was seen to use.

A process that cannot be read is skipped: it has ended meanwhile, or it is not ours to
read (more privileged than us, or not dumpable), and so is no rank of a job of ours,
which runs with our credentials. Not root, only our own processes are read (the files
asked about are ours, mode 0600: nobody else can open them).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Collection, Iterable

__all__ = ["dying", "holders", "released", "wait_gone"]

#: the kernel's flag of a process that has begun to exit (PF_EXITING, /proc/PID/stat)
PF_EXITING = 0x4
#: SIGKILL's bit in a pending-signal mask of /proc/PID/status
SIGKILL_BIT = 1 << 8
#: what reading /proc/PID/... raises for a process that ended meanwhile (ENOENT, or ESRCH
#: once the directory was opened) or that is not ours to read
_UNREADABLE = (FileNotFoundError, ProcessLookupError, PermissionError)


def holders(paths: Collection[str]) -> dict[str, set[int]] | None:
    """Those of `paths` that a live process holds open or maps, with the pids that do;
    None without /proc. The open files of every process first, then, if some of `paths`
    are still not found, the maps (a file mapped and closed since; a costlier read)."""
    uid = os.geteuid()
    found: dict[str, set[int]] = {}
    try:
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return None
    if uid != 0:
        pids = [pid for pid in pids if _owner(pid) == uid]
    for pid in pids:
        with contextlib.suppress(*_UNREADABLE):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # closed meanwhile
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target in paths:
                        found.setdefault(target, set()).add(pid)
    wanted = [path.encode() for path in paths if path not in found]
    for pid in pids if wanted else ():
        with contextlib.suppress(*_UNREADABLE):
            with open(f"/proc/{pid}/maps", "rb") as maps:
                text = maps.read()
            if any(path in text for path in wanted):
                for line in text.decode(errors="replace").splitlines():
                    fields = line.split(maxsplit=5)  # start-end perms offset dev inode path
                    if len(fields) == 6 and fields[5] in paths:
                        found.setdefault(fields[5], set()).add(pid)
    return found


def released(paths: Collection[str], mark: str | None = None) -> set[str] | None:
    """Those of `paths` that no live process holds now (`holders`), or, given `mark`
    (``NAME=VALUE``), only processes started with `mark` in their environment (what they
    inherited: /proc/PID/environ; one that cannot be read does not carry it). None
    without /proc."""
    busy = holders(paths)
    if busy is None:
        return None
    return {
        path
        for path in paths
        if not busy.get(path) or mark is not None and all(_carries(p, mark) for p in busy[path])
    }


def _carries(pid: int, mark: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return mark.encode() in environ.read().split(b"\0")
    except OSError:  # (ended meanwhile: it holds nothing now, but is not known to be ours)
        return False


def dying(pid: int) -> bool:
    """Process `pid` has ended, is exiting (a zombie, or PF_EXITING), or has a SIGKILL
    pending: it will hold nothing in a moment."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X") or int(fields[6]) & PF_EXITING:
            return True
        with open(f"/proc/{pid}/status") as status:
            masks = [line.split()[1] for line in status if line.startswith(("SigPnd", "ShdPnd"))]
    except (OSError, IndexError, ValueError):
        return True  # (gone, or unreadable as it ends)
    return any(int(mask, 16) & SIGKILL_BIT for mask in masks)


def wait_gone(pids: Iterable[int], timeout: float) -> None:
    """Wait (bounded by `timeout` seconds) until none of `pids` is alive (zombies are
    gone: their files are closed)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while not _ended(pid) and time.monotonic() < deadline:
            time.sleep(0.005)


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _owner(pid: int) -> int | None:
    """The uid of process `pid` (None if it has ended)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
