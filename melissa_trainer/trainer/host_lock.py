"""A host-local lock on an output directory's path, that no ``rm`` can remove.

The file lock of `output_lock` lives in ``{output_dir}/trainer.lock``: a user who
``rm -rf``'s the directory of a running trainer (and starts another on the same path)
deletes it with the directory, and the second trainer locks a new file of the same name.
So rank 0 also binds a Linux abstract-namespace unix socket named after the directory's
resolved path (``"\\0melissa-trainer-" + sha256(path)``, `host_key`): it lives in the
kernel, not in a file system, so nothing but the holder's exit removes it, and the
kernel frees it when the holder dies however it dies (``kill -9`` included), so a
resume after a crash is never refused by it.

The socket listens: a refused taker connects to it (`HostLock.peer_pid`) and reads the
holder's pid from the connection's ``SO_PEERCRED``, so its refusal names the pid. The
holder never answers; it drops the waiting connections when asked (`HostLock.drain`,
at its action points), so that its backlog does not fill. A full backlog makes a probe
unanswered (pid 0): so a taker probes once per holder, not at each poll of a wait (a
stopping holder drains nothing), and reads the lock file's holder where no probe
answers (`lock_holder.host_holder`).

A forked child (a DataLoader worker with the fork start method) closes its copy of the
socket (`_close_in_child`): otherwise the name stayed bound while a worker outlived its
``kill -9``'d trainer, and a requeued trainer was refused, naming a dead pid.

Limits (say them to users): the name is one host's (one network namespace's: a
container with its own network namespace does not see it), so across nodes of a shared
file system only the file lock can tell that a directory is in use; two paths to one
directory that resolve differently (bind mounts) have two names, where the file lock
still sees one file while it exists. Off Linux the host lock is skipped.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import struct
import sys
import weakref
from pathlib import Path

__all__ = ["HostLock", "host_key"]

logger = logging.getLogger("melissa_trainer.trainer")

_PREFIX = b"\0melissa-trainer-"
_BACKLOG = 64  # refused takers waiting to be drained (`HostLock.drain`)
_held: weakref.WeakSet[HostLock] = weakref.WeakSet()  # the held ones (`_close_in_child`)


def host_key(output_dir: str) -> bytes:
    """The abstract socket's name for `output_dir` (its resolved absolute path)."""
    resolved = str(Path(output_dir).resolve())
    return _PREFIX + hashlib.sha256(resolved.encode()).hexdigest().encode()


class HostLock:
    """The host-local lock of one output directory's path (module docstring).

    `take` binds it or tells who holds it; `release` closes it (also done by the kernel
    when the process exits). Not thread-safe: its `OutputDirLock`'s thread only.
    """

    def __init__(self, output_dir: str) -> None:
        self.output_dir = output_dir
        self.key = host_key(output_dir)
        self._sock: socket.socket | None = None

    @property
    def held(self) -> bool:
        return self._sock is not None

    def take(self, probe: bool = True) -> int | None:
        """Bind the name: None once it is ours (or off Linux, or where the socket cannot
        be bound for another reason than its name in use: warned of), else the holder's pid
        (`peer_pid`; 0 when not asked, `probe` False)."""
        if self._sock is not None or not sys.platform.startswith("linux"):
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # (not inherited: CLOEXEC)
        try:
            sock.bind(self.key)
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                # (a sandbox refusing abstract sockets: the file lock still guards the
                # directory; only a removed directory's second trainer goes unrefused)
                logger.warning(
                    "output_dir %s: no host lock (an abstract unix socket could not be "
                    "bound: %s); the lock file alone guards it, so a trainer started "
                    "after this directory is removed would not be refused",
                    self.output_dir,
                    exc,
                )
                return None
            return self.peer_pid() if probe else 0
        try:
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        _held.add(self)
        return None

    def peer_pid(self) -> int:
        """The pid of the process holding the name (0 when it cannot be told: nobody, the
        holder between its bind and its listen, or its backlog full). Each call leaves a
        connection waiting on the holder's socket until it drains (module docstring)."""
        return _peer_pid(self.key)

    def drain(self) -> None:
        """Drop the connections refused takers left waiting (module docstring)."""
        sock = self._sock
        while sock is not None:
            try:
                conn, _ = sock.accept()
            except OSError:  # (BlockingIOError: none left)
                return
            conn.close()

    def release(self) -> None:
        """Close the socket: the name is free. Idempotent."""
        sock, self._sock = self._sock, None
        _held.discard(self)
        if sock is not None:
            sock.close()


def _close_in_child() -> None:
    """In a forked child: close its copies of the held sockets (module docstring); the
    parent's stay bound. The child holds none."""
    for lock in list(_held):
        lock.release()  # (a close of this process's descriptor only: no shutdown)


os.register_at_fork(after_in_child=_close_in_child)


def _peer_pid(key: bytes) -> int:
    """The pid of the process listening on `key` (0 when it cannot be told)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        with contextlib.suppress(OSError):
            probe.connect(key)
            creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, _uid, _gid = struct.unpack("3i", creds)
            return pid
        return 0
    finally:
        probe.close()
