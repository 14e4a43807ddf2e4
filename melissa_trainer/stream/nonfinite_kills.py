"""Rank 0's word to the other ranks that its receiver failed a simulation for NaN or Inf.

Under ``nonfinite="fail"`` rank 0's receiver fails a simulation that sends NaN or Inf
(`nonfinite`: the failure is listed for the launcher), and rank 0's launcher kills it.
Every rank that had a connection of it reads that connection close before its BYE.
Rank 0's receiver knows why (its ledger's ``nonfinite_failures`` grew:
`connection_lines`); another rank's did not, and warned of a loss with the paragraph of
causes, which a user read as a second, unexplained failure. So rank 0's receiver also
says it in the rendezvous directory, as rank 0 says that the study stops
(`study_stops`): a file ``nonfinite_kills``, its first line the run id (``-`` for
none), then one line per failure, the simulation's id (`NonfiniteKills.announce`),
written by the ingester before it lists the failure for the launcher, so before the
kill. Another rank's watch reads the simulation's count there when it reads a HELLO
(`NonfiniteKills.failures`), and again when it reads that connection's close without
its BYE: grown in between, the close is the kill of the attempt that HELLO began, said
in one INFO line naming rank 0's failure. A close whose count did not grow, of a
simulation failed before (a restart that died on its own; or the killed attempt
itself, its HELLO read here only after rank 0 had failed it: a rank kept busy), is
warned of as before, the warning naming that kill as a possible cause. No time is
waited on either side: the file is written before the kill, the close read after it.

Cost: rank 0 writes a line per failed attempt (rare: each is a failed attempt of the
study's budget). Another rank lists the directory and opens the file at each HELLO and
each close without a BYE (rare messages: nothing on the data path), and reads it only
when it changed; all of it only under ``nonfinite="fail"`` with a rendezvous directory
and several ranks (`for_receiver`). On a shared file system whose clients cache a
missing name or a file's attributes (NFS), a rank on another node reads it through a
listing of the directory then a fresh open (`fresh_lines`: close-to-open consistency),
not a ``stat``, so it sees a line written before the kill at the close or HELLO it
reads after it (where the mount keeps close-to-open: not ``nocto``). An earlier run's
file is another run's (its run id), or removed by rank 0 before it launches anything
(`clear_nonfinite_kills`: a study outside a trainer has no run id). Never raises: a
file that cannot be written or read is what it was before the file (the other ranks
warn).

Thread-safety: `announce` from rank 0's ingester (one thread at a time: whoever holds
its lock), `failures` from another rank's; one object per receiver.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections import Counter
from pathlib import Path

__all__ = [
    "NONFINITE_KILLS_FILE",
    "NonfiniteKills",
    "clear_nonfinite_kills",
    "fresh_lines",
    "read_lines",
]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: rank 0's word to every rank of the simulations its receiver failed for NaN or Inf
NONFINITE_KILLS_FILE = "nonfinite_kills"


class NonfiniteKills:
    """``{directory}/nonfinite_kills`` of run `run_id` (module docstring): rank 0 writes
    it (`announce`), the other ranks read it (`failures`)."""

    def __init__(self, directory: str | os.PathLike[str], run_id: str | None) -> None:
        self._path = Path(directory) / NONFINITE_KILLS_FILE
        self._run = run_id or "-"
        self._written = False  # rank 0: this run's file made (then appended to)
        self._seen: FileKey | None = None  # (inode, size, mtime) last read
        self._counts: Counter[int] = Counter()  # failures per simulation, as last read

    @classmethod
    def for_receiver(
        cls, directory: str | os.PathLike[str] | None, run_id: str | None, world: int, policy: str
    ) -> NonfiniteKills | None:
        """The word for a receiver of `world` ranks under the `policy` for NaN (its
        ``nonfinite``), or None where no other rank needs it: one rank, no rendezvous
        directory, or a policy that fails no simulation."""
        if world < 2 or directory is None or policy != "fail":
            return None
        return cls(directory, run_id)

    def announce(self, simulation_id: int) -> None:
        """Rank 0: its receiver failed `simulation_id` for NaN or Inf, and the launcher
        will kill it. The run's first failure makes the file (written aside then
        renamed: never read half-written, an earlier one replaced); the next ones
        append a line (a reader ignores an unfinished last line). An OSError is logged:
        the other ranks then warn of that kill as of a loss, as before the file."""
        line = f"{simulation_id}\n"
        tmp = None
        try:
            if self._written:
                with self._path.open("a") as f:
                    f.write(line)
                return
            fd, tmp = tempfile.mkstemp(prefix=f".{NONFINITE_KILLS_FILE}.", dir=self._path.parent)
            with os.fdopen(fd, "w") as f:
                f.write(f"{self._run}\n{line}")
            os.replace(tmp, self._path)
            self._written = True
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    Path(tmp).unlink(missing_ok=True)
            logger.info(
                "could not tell the other ranks that simulation %d was failed for NaN or "
                "Inf (%s): they may warn of its kill as of data lost",
                simulation_id,
                exc,
            )

    def failures(self, simulation_id: int) -> int:
        """Another rank: how many times rank 0's receiver failed `simulation_id` for NaN
        or Inf in this run, as its file says now (0 when it is missing or another
        run's; as last read when a read fails: a transient error is no file removed).
        Reads the file only when it changed since the last call."""
        try:
            key, lines = read_lines(self._path, self._seen)
        except (OSError, UnicodeDecodeError) as exc:  # (transient, NFS: read again next time)
            logger.debug("reading %s: %s; its counts as last read", self._path, exc)
            return self._counts[simulation_id]
        if key is None:  # (none yet: no failure; or removed)
            self._seen, self._counts = None, Counter()
            return 0
        if lines is not None:
            self._seen = key
            mine = bool(lines) and lines[0] == self._run
            self._counts = Counter(int(s) for s in lines[1:] if s.isdigit()) if mine else Counter()
        return self._counts[simulation_id]


#: what tells a file's versions apart: (inode, size, modification time in ns)
FileKey = tuple[int, int, int]


def fresh_lines(
    path: Path, last: FileKey | None, listed: bool = False
) -> tuple[FileKey | None, list[str] | None]:
    """`path`'s key and its complete lines (an unfinished last line left out), read
    through a fresh open; the lines None where the key is `last` (unchanged: not read
    again); both None where the file is missing or cannot be read (nothing said: read
    again next time).

    Written for a shared file system whose clients cache what they looked up (NFS): a
    ``stat`` of a path answers from the cached attributes (for seconds), and a lookup
    of a name from a cached miss; a fresh open is revalidated with the server
    (close-to-open consistency: the writer's appends, made before its close, are seen),
    and a listing of the directory first revalidates it, a name made on another node
    since then found (the caller lists it once for several files: `listed`). Cost: a
    listing and an open per call, where a ``stat`` was: these files are read at HELLOs,
    at a failure's hand-off and at rank 0's idle polls only."""
    try:
        return read_lines(path, last, listed)
    except (OSError, UnicodeDecodeError):
        return None, None


def read_lines(
    path: Path, last: FileKey | None, listed: bool = False
) -> tuple[FileKey | None, list[str] | None]:
    """`fresh_lines`, but only a missing file answers (None, None): any other OSError
    or a UnicodeDecodeError is raised (a reader that keeps what it read last, rather
    than take a transient error for a file removed: `NonfiniteKills.failures`)."""
    if not listed:
        with contextlib.suppress(OSError):  # (the open below says what is wrong)
            os.listdir(path.parent)
    try:
        with path.open("rb") as f:
            st = os.fstat(f.fileno())
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if key == last:
                return key, None
            text = f.read().decode()
    except FileNotFoundError:
        return None, None
    return key, text.split("\n")[:-1]


def clear_nonfinite_kills(directory: str | os.PathLike[str]) -> None:
    """Remove an earlier run's ``nonfinite_kills`` (rank 0, before it launches anything)."""
    try:
        (Path(directory) / NONFINITE_KILLS_FILE).unlink(missing_ok=True)
    except OSError as exc:  # (its run id still tells it apart, where there is one)
        logger.debug("removing %s: %s", NONFINITE_KILLS_FILE, exc)
