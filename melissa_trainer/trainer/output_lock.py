"""One trainer per output directory: an exclusive OS lock on ``{output_dir}/trainer.lock``.

Two trainers on one `output_dir` would mix their data: the second rewrites the
rendezvous, the first one's simulations stream into the second one's receivers, and
both write checkpoints and logs into the same folders. So rank 0 of a trainer takes an
exclusive lock on ``{output_dir}/trainer.lock`` when the `OnlineTrainer` is made, before
anything is written to `output_dir`, and holds it until `train()` returns or raises
(or the process exits). A second trainer is refused at once with `OutputDirLocked`,
which names the holder (host, pid, since when, run id) and the fixes.

What the lock relies on:

* ``fcntl.flock`` on an open file: the kernel releases it when the holder's process
  dies, however it dies (``kill -9``, an OOM kill, a node's reboot for a network file
  system's lock manager), so a dead holder never blocks a requeue: the file may still
  name it, but nobody holds its lock, and the next trainer takes it at once. The file
  itself is never deleted (deleting a lock file lets two processes lock two different
  files of one name); a taker whose file was replaced between its open and its flock
  tries again on the new one.
* The flock is the truth, the record only describes the holder: a held flock whose
  record cannot be read (the file truncated while its trainer runs, or a program other
  than a trainer holding it with a record of its own) is refused like any holder, at
  once, with the pids that this host's ``/proc/locks`` names as holding it.
* On NFS (Linux clients), ``flock`` is emulated with POSIX byte-range locks and goes
  through the server's lock manager (NLM for NFSv3, the protocol itself for NFSv4), so
  it holds across nodes; a holder whose node died is released once the server's lease
  expires (NFSv4: about 90 s). On Lustre, locks hold across nodes only on clients
  mounted with ``-o flock``; ``localflock`` locks within one node only, and
  ``noflock`` refuses the call (ENOSYS): a file system that refuses locks makes the
  trainer fail with a message saying so. Set ``MELISSA_TRAINER_OUTPUT_LOCK=off`` to run
  there without the lock (then nothing but the run id of `melissa_trainer.stream`
  keeps two trainers on one directory apart).
* ``rm -rf`` of a running trainer's directory deletes the lock file with it, and a new
  trainer would lock a new file: rank 0 also holds a lock on the resolved path that no
  ``rm`` removes (`host_lock`: an abstract unix socket, freed by the kernel when its
  process dies, ``kill -9`` included), so a trainer of the same host is still refused,
  naming the holder's pid (once its record had `RECORD_WAIT` s to show: a trainer
  that took the path a moment ago). Across nodes only the file lock tells. `lost`: the held
  file gone or replaced (the trainer then stops, `dir_lost`, rather than remake it).
* Within one process, a registry of the locks it holds refuses a second trainer on
  the same directory while the first one trains (``flock`` alone would not on NFS,
  where the emulated lock belongs to the process). A first trainer that is not
  training (built and dropped, or built again after a mistake, as in a notebook) is
  superseded: the new one takes the lock, and the old one's `train()` would refuse.

A holder that is shutting down (its loop has ended: it writes its last checkpoint and
stops its simulations) says so in the file (`OutputDirLock.stopping`), ``ended`` as
it lets go (`release`). A trainer that finds the lock held by a stopping (or ending)
holder waits for it, up to `STOPPING_WAIT` seconds, instead of failing: a requeued or
relaunched run that starts while the old one writes its preemption checkpoint then
resumes from that checkpoint. A running holder refuses at once. The wait asks the
host lock's holder its pid once, not at each poll (`lock_holder.host_holder`).

Thread-safety: an `OutputDirLock` is used by the thread that made it (the trainer's).

The holder's record, its reading and the refusal naming the holder are `lock_holder`'s
(`Holder`, `OutputDirLocked`, `LOCK_FILE`: import them from there); the directory made and
``MELISSA_TRAINER_OUTPUT_LOCK`` are `output_dir_errors`' (`make_output_dir`,
`ENV_OUTPUT_LOCK`); rank 0's lock told to every rank as the trainer is made (its
broadcast, watched) is `lock_share`'s; the trainer's hold on it across its `train()`
calls, `output_hold`'s; the locks this process holds, `held_locks`'; the run id drawn
for the lock's record, `run_id`'s (`new_run_id`).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
import time
from pathlib import Path

from melissa_trainer.trainer.held_locks import (
    close_quietly,
    held_files,
    held_hosts,
    registry_lock,
    same_file,
)
from melissa_trainer.trainer.host_lock import HostLock
from melissa_trainer.trainer.lock_holder import (
    LOCK_FILE,
    Holder,
    OutputDirLocked,
    encode,
    flock_holders,
    host_holder,
    peek_holder,
    read_holder,
)

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.trainer.output_dir_errors import ENV_OUTPUT_LOCK as ENV_OUTPUT_LOCK
from melissa_trainer.trainer.output_dir_errors import make_output_dir, unsupported, unwritable

__all__ = ["STOPPING_WAIT", "OutputDirLock"]

logger = logging.getLogger(__name__)

#: seconds a new trainer waits for a holder that says it is stopping
STOPPING_WAIT = 120.0
_POLL = 0.05  # seconds between two tries while waiting for a stopping holder
#: seconds a taker waits for the record of a trainer that took the path's host lock and
#: has not written it yet (it does within milliseconds: `OutputDirLock._newcomer`)
RECORD_WAIT = 3.0


def _forget_in_child() -> None:
    """In a forked child (a DataLoader worker, fork start method): close its copies of
    the held lock files' descriptors, without an unlock (one would unlock the parent's),
    so that the lock ends with its trainer's process, ``kill -9`` included, not with the
    last of its workers (a trainer requeued meanwhile was refused, naming a dead pid);
    `host_lock` closes its socket's copy alike. The child holds no lock."""
    for lock in list(held_files.values()):
        fd, lock._fd, lock._key = lock._fd, None, None
        if fd is not None:
            close_quietly(fd)
    held_files.clear()
    held_hosts.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class OutputDirLock:
    """The exclusive lock of one output directory (module docstring).

    `acquire` takes it or raises `OutputDirLocked`; `release` gives it back (also done
    by the kernel when the process exits). Idempotent both.
    """

    def __init__(self, output_dir: str | os.PathLike[str], run_id: str) -> None:
        self.output_dir = str(output_dir)
        self.path = Path(output_dir) / LOCK_FILE
        self.run_id = run_id
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None
        self._host: HostLock | None = None  # made at the first try (the path resolved then)
        self._peer = 0  # the host lock's holder as a probe found it (`host_holder`)
        self._since = ""
        self._state = "running"
        #: its trainer is inside `train()` (a trainer of this process then cannot take
        #: over the lock); set and cleared by the trainer
        self.active = False
        #: a newer trainer of this process took the lock over (this one must not train)
        self.superseded = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, stopping_wait: float = STOPPING_WAIT) -> None:
        """Take the lock, or raise `OutputDirLocked` naming the holder: at once when the
        holder is running, after up to `stopping_wait` s when it says it is stopping.

        Creates `output_dir` (and the lock file) if needed, once the path's host lock
        is taken: a refused trainer makes nothing. Blocks only in that wait.

        Raises:
            OutputDirLocked: another trainer holds it.
            OSError: the file system refuses locks (the message names the way out), or
                `output_dir` or the file cannot be created (the message names
                `output_dir` and the way on: `make_output_dir`).
        """
        if self._fd is not None:
            return
        started, warned = time.monotonic(), False
        while True:
            taken, holder = self._try()
            if taken:
                return
            waited = time.monotonic() - started
            # an unreadable record (truncated, or another program's) is a held lock whose
            # state is unknown: refused at once, never taken (the flock is the truth)
            if holder is None:
                raise OutputDirLocked(self.output_dir, None, lockers=flock_holders(self.path))
            # "ended": a holder between its last record and its unlock (`release`)
            if holder.state not in ("stopping", "ended") or waited >= stopping_wait:
                raise OutputDirLocked(self.output_dir, holder, waited)
            if not warned:
                warned = True
                logger.warning(
                    "output_dir %r: waiting up to %.0f s for the trainer that is stopping "
                    "there to exit (%s)",
                    self.output_dir,
                    stopping_wait,
                    holder.describe(),
                )
            time.sleep(_POLL)

    def _try(self) -> tuple[bool, Holder | None]:
        """One try: ``(True, None)`` once the lock is ours, else ``(False, the holder's
        record)``, the record None when it cannot be read (the lock is held all the same).
        The host lock first (`_take_host`), then the file's; the host lock let go again
        when the file's is not taken."""
        refused = self._take_host()
        if refused is not None:
            return refused
        taken: tuple[bool, Holder | None] = (False, None)
        try:
            make_output_dir(self.output_dir)  # (after the host lock: a refusal makes nothing)
            taken = self._try_file()
        finally:
            if not taken[0]:
                self._drop_host()
        return taken

    def _take_host(self) -> tuple[bool, Holder | None] | None:
        """Take the host lock of `output_dir`'s path (`host_lock`): None once held, else
        ``(False, record)`` of the holder the file names (or None: unreadable), which
        `acquire` refuses or waits for.

        Raises:
            OutputDirLocked: a trainer of this host holds the path but the lock file does
                not name it (removed or replaced under it: `OutputDirLocked.host_pid`).
        """
        if self._host is None:
            self._host = HostLock(self.output_dir)
        host = self._host
        if host.held:
            return None
        with registry_lock:
            other = held_hosts.get(host.key)
        if other is not None and other is not self:  # another trainer of this process
            if other.active:
                return False, other.record()
            other.superseded = True  # built, not training: superseded (docstring)
            other.release()
        if host.take(probe=False) is None:
            with registry_lock:
                held_hosts[host.key] = self
            return None
        pid, holder = host_holder(host.peer_pid, self.path, self._peer)  # (probed once)
        if holder is not None:
            self._peer = pid
            return False, holder  # the file names it: refused, or waited for if stopping
        return self._newcomer(pid)

    def _newcomer(self, pid: int) -> tuple[bool, Holder | None] | None:
        """The host lock's holder `pid` has no record in the file: a trainer that took
        the path a moment ago (its record follows within milliseconds: two trainers
        started at once on a fresh directory), unless its directory was removed. Its
        record is waited for up to `RECORD_WAIT` s, the file alone read (no probe: each
        one stays in the holder's backlog), the path retaken if its holder lets it go.
        Returns as `_take_host` does: ``(False, None)`` when none came but `pid` holds
        the file's flock (its record unreadable); raises `OutputDirLocked` (removed)
        when neither."""
        deadline = time.monotonic() + RECORD_WAIT
        while pid and time.monotonic() < deadline:
            holder = peek_holder(self.path)
            if holder is not None and holder.pid == pid and holder.host == socket.gethostname():
                self._peer = pid
                return False, holder  # (refused, naming it, as any holder)
            time.sleep(_POLL)
            if self._host is not None and self._host.take(probe=False) is None:
                with registry_lock:  # (it did not keep the path: ours now)
                    held_hosts[self._host.key] = self
                return None
        if pid and pid in flock_holders(self.path):
            return False, None  # its file, unreadable (truncated): refused as such
        raise OutputDirLocked(self.output_dir, None, host_pid=pid)

    def _drop_host(self) -> None:
        """Let the host lock go (not taken, or released)."""
        if self._host is not None and self._host.held:
            with registry_lock:
                if held_hosts.get(self._host.key) is self:
                    del held_hosts[self._host.key]
            self._host.release()

    def lost(self) -> str | None:
        """What became of the held lock file: "removed" (with `output_dir`, or alone),
        "replaced" (another file of its name), or None (intact, or not held). Also drops
        the connections refused takers left on the host lock (`HostLock.drain`)."""
        if self._fd is None or self._key is None:
            return None
        if self._host is not None:
            self._host.drain()
        if not os.path.exists(self.path):
            return "removed"
        return None if same_file(self.path, self._key) else "replaced"

    def _try_file(self) -> tuple[bool, Holder | None]:
        """`_try`'s file lock (the host lock held)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            pass
        else:
            with registry_lock:
                other = held_files.get((st.st_dev, st.st_ino))
            if other is not None and other is not self:  # another trainer of this process
                if other.active:
                    return False, other.record()
                other.superseded = True  # built, not training: superseded (docstring)
                other.release()
                logger.info(
                    "output_dir %r: taken over from a trainer of this process that was not "
                    "training (it can no longer train)",
                    self.output_dir,
                )
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:  # (a read-only archive of a run, resumed in place)
            raise unwritable(self.output_dir, self.path, exc) from exc
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise unsupported(self.output_dir, exc) from exc
                holder = read_holder(fd)
                os.close(fd)
                return False, holder
            if not same_file(self.path, key):
                # the file was replaced (deleted and made again) between our open and our
                # flock: we hold the lock of a file nobody else will look at; try again
                os.close(fd)
                return self._try_file()
        except BaseException:
            close_quietly(fd)
            raise
        with registry_lock:
            held_files[key] = self
        self._fd, self._key = fd, key
        self._since = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._write("running")
        return True, None

    def stopping(self) -> None:
        """Say in the file that this holder is shutting down (a trainer that finds it so
        waits for it instead of failing). No-op when not held."""
        if self._fd is not None:
            self._write("stopping")

    def release(self) -> None:
        """Give the lock back; the file stays, naming the last holder, ``ended`` (not
        ``stopping``, which reads as a holder about to exit). Idempotent."""
        self._drop_host()
        if self._fd is None:
            return
        try:
            self._write("ended")
        except OSError as exc:  # the unlock matters more than the record: said, not raised
            logger.warning("output_dir %r: lock's end not recorded: %s", self.output_dir, exc)
        fd, self._fd = self._fd, None
        with registry_lock:
            if self._key is not None:
                held_files.pop(self._key, None)
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def record(self) -> Holder:
        """This holder's record, as the file says it."""
        return Holder(socket.gethostname(), os.getpid(), self._since, self.run_id, self._state)

    def _write(self, state: str) -> None:
        assert self._fd is not None
        self._state = state
        os.pwrite(self._fd, encode(self.record()), 0)
