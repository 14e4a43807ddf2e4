"""Whether a process recorded by its pid (and start time) still runs on this machine:
one reading of ``/proc/PID/stat`` for every record that names a process (a rank's hook
mark, `trainer.hook_mark`; a receiver's rendezvous file, `stream.trainer_process`).

A pid alone can mislead: it may be a zombie (ended, not reaped yet: the launcher's agent
may be slow to) or, once reaped, reused by another process; the start time (clock ticks
after boot, ``/proc/PID/stat``'s 22nd field) tells the first process from a later one.
Linux's ``/proc``; elsewhere, or where it hides other users' processes (``hidepid``),
`runs` cannot tell. A pid names a process only in its pid namespace on its machine
(`pid_scope`): ranks or a trainer in containers of their own on one node (``apptainer
exec --containall``, Docker with host networking) share the host name, not the pids, so
a record checked from another scope says nothing. Standard library only; no state;
thread-safe.
"""

from __future__ import annotations

import os

__all__ = ["pid_scope", "runs", "start_time"]


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the name (the state first), None when it
    cannot be read (no such process, no ``/proc``, hidden)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[-1].split()  # (a name may hold ") ")
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """The start time of process `pid`; None when it does not run (no such pid, or a
    zombie) or cannot be read."""
    fields = _stat(pid)
    if fields is None or len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def runs(pid: int, start: int = 0) -> bool | None:
    """True: process `pid` runs (and, `start` given, since that start time); False: it
    does not (no such pid, a zombie, or the pid another process's now); None: cannot
    tell (a pid that is no process's to name, or its ``/proc`` entry not readable)."""
    if pid <= 0:
        return None  # (0 and -1 name process groups to `kill`)
    try:
        os.kill(pid, 0)  # (signal 0: whether the pid exists, even another user's)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except OverflowError:
        return None
    fields = _stat(pid)
    if fields is None:
        return None
    if fields[0] in (b"Z", b"X"):
        return False
    return not start or (len(fields) >= 20 and int(fields[19]) == start)


def pid_scope() -> str | None:
    """``"BOOT PIDNS"``: this machine's boot id and this process's pid namespace (the
    link ``/proc/self/ns/pid`` names), in which alone a pid recorded here names its
    process; None without ``/proc``."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return f"{boot.read().strip()} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None
