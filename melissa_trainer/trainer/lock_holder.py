"""Who holds an output directory's lock: the holder's record in the lock file
(`Holder`, written by `encode` in one `pwrite`, read by `read_holder`), the pids this
host's kernel names as holding it (`flock_holders`), who holds the path's host lock
(`host_holder`), and the refusal that names them (`OutputDirLocked`). The lock itself
is `output_lock`'s.

The record only describes the holder; the flock is the truth (`output_lock`'s docstring).
Every function here reads or formats; none takes or gives back a lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from melissa_trainer.trainer.host_lock import host_key

__all__ = [
    "LOCK_FILE",
    "RECORD_BYTES",
    "Holder",
    "OutputDirLocked",
    "encode",
    "flock_holders",
    "host_holder",
    "peek_holder",
    "read_holder",
]

#: the lock file's name, in `output_dir`
LOCK_FILE = "trainer.lock"
#: the record is padded to this many bytes and written in one `pwrite` at offset 0, so a
#: reader sees the old record or the new one, never a truncated file (but the very first)
RECORD_BYTES = 1024


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) an output directory's lock, as its file says."""

    host: str
    pid: int
    since: str  # local time, ISO 8601
    run_id: str
    state: str  # "running", "stopping", or "ended" (released: no longer held)

    def describe(self) -> str:
        return (
            f"host {self.host}, pid {self.pid}, since {self.since}, run {self.run_id}, {self.state}"
        )


class OutputDirLocked(RuntimeError):
    """Another trainer holds the output directory's lock.

    Attributes:
        output_dir: the directory.
        holder: the holder's record (None if it could not be read: the lock is held all
            the same, and refused).
        lockers: with no record, the pids that hold the file's flock as this host's
            ``/proc/locks`` says (empty when the holder is on another node, or unknown).
        host_pid: the pid of the trainer of this host that holds the directory's path
            (`host_lock`) while its lock file is gone or another file (the directory
            removed under it); 0 when its socket did not answer; None: not that case.
    """

    def __init__(
        self,
        output_dir: str,
        holder: Holder | None,
        waited: float = 0.0,
        lockers: tuple[int, ...] = (),
        host_pid: int | None = None,
    ) -> None:
        if host_pid is not None:
            # 0: its socket did not answer (its backlog full of refused takers' probes);
            # ss lists the abstract name with its process
            name = host_key(output_dir)[1:33].decode()
            pid = f"pid {host_pid}" if host_pid else f"a process ('ss -xlp | grep {name}' names it)"
            who = (
                f"{pid} on this host holds its path, though {Path(output_dir) / LOCK_FILE} "
                "is gone or another file, still a moment after (a trainer that has just "
                "taken it names itself there at once): was the directory removed while "
                "that trainer runs? That trainer keeps writing there"
            )
            kill = f"kill {host_pid}" if host_pid else "stop it"
        elif holder is not None:
            who = holder.describe()
            kill = f"kill {holder.pid} on {holder.host}"
        else:
            # the flock is held but the record is not ours to read (truncated, or a
            # program other than a trainer holds the lock): the kernel's table names it
            pids = ", ".join(str(pid) for pid in lockers)
            seen = f"; /proc/locks: held by pid {pids} on this host" if lockers else ""
            who = (
                f"holder unknown: {Path(output_dir) / LOCK_FILE} is locked but its record "
                f"is unreadable{seen}; 'fuser -v' on that file names the holder on its node"
            )
            kill = f"kill {pids}" if lockers else "stop it"
        waited_text = f" (waited {waited:.0f} s for it to stop)" if waited > 0 else ""
        super().__init__(
            f"output_dir {output_dir!r} is in use by another trainer ({who}){waited_text}: "
            f"two trainers on one output_dir would mix their simulations' data, "
            f"checkpoints and logs. Give this run another --output_dir, or wait for that "
            f"trainer to end ({kill} if it should not run); a dead holder's lock is "
            f"released by the kernel, so a requeue after it died starts at once"
        )
        self.output_dir, self.holder, self.lockers = output_dir, holder, lockers
        self.host_pid = host_pid


def encode(holder: Holder) -> bytes:
    """`holder` as the lock file holds it: JSON padded to `RECORD_BYTES`."""
    record = {
        "host": holder.host,
        "pid": holder.pid,
        "since": holder.since,
        "run_id": holder.run_id,
        "state": holder.state,
    }
    return json.dumps(record).encode()[: RECORD_BYTES - 1].ljust(RECORD_BYTES - 1) + b"\n"


def read_holder(fd: int) -> Holder | None:
    """The holder's record, read through `fd`; None when unreadable. A holder that has
    just taken the lock may not have written it yet: retried for up to 1 s."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            raw = os.pread(fd, RECORD_BYTES, 0)
            entry: Any = json.loads(raw.decode())
            return Holder(
                str(entry["host"]),
                int(entry["pid"]),
                str(entry["since"]),
                str(entry["run_id"]),
                str(entry["state"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)


def peek_holder(path: Path) -> Holder | None:
    """The holder's record as another rank reads it (None: unreadable, or another node's
    file system)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return read_holder(fd)
    finally:
        os.close(fd)


def flock_holders(path: Path) -> tuple[int, ...]:
    """The pids holding a flock on the file at `path`, from this host's ``/proc/locks``
    (empty off Linux, or when the holder is another node's)."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii") as table:
            lines = table.read().splitlines()
    except OSError:
        return ()
    # "1: FLOCK  ADVISORY  WRITE 8356 fe:00:2153736 0 EOF": device in hex, inode decimal
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
            with contextlib.suppress(ValueError):
                pids.append(int(fields[4]))
    return tuple(sorted(set(pids)))


def host_holder(probe: Callable[[], int], path: Path, known: int) -> tuple[int, Holder | None]:
    """Who holds the host lock (`host_lock`) of the directory of lock file `path`, for a
    taker that could not take it: ``(pid, record)``, the record the file's when it names
    that pid on this host (else None: the file gone, replaced, or unreadable); pid 0 when
    nothing tells it.

    `probe` (`HostLock.peer_pid`) is called unless the file names `known`, the pid an
    earlier probe found: each probe leaves a connection on the holder's socket until the
    holder drains it at an action point, and a stopping holder reaches none (a wait that
    probed at each poll filled its backlog in 64 polls, and was refused as if its
    directory had been removed). An unanswered probe (the backlog full) is read as the
    file's holder when that holder holds the file's flock: one trainer takes both locks.
    """
    holder = peek_holder(path)
    named = holder.pid if holder is not None and holder.host == socket.gethostname() else 0
    pid = known if named and named == known else probe()
    if not pid and named and named in flock_holders(path):
        pid = named
    return pid, holder if pid and pid == named else None
