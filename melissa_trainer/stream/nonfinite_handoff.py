"""Another rank's failures for NaN or Inf, handed to rank 0 for its launcher.

Under ``nonfinite="fail"`` a receiver fails a simulation that sends NaN or Inf
(`nonfinite`): the failure is listed in its `refused`, which only rank 0's is read by a
study's launcher (`Receiver.report_refusals_to_launcher`), which kills the simulation and
applies its failure policy. The receiver of another rank had no one to tell and raised
`NonFiniteDataError`, which stops the whole training; with time steps routed over the
ranks a diverging solver sends NaN to every rank, so one bad simulation ended the run.
Now that receiver hands the failure to rank 0 through the rendezvous directory, the
reverse of `nonfinite_kills` (rank 0's word to the others):

* Rank 0, once a launcher reads its `refused` (`listen`), writes ``nonfinite_fails``,
  its run id (``-`` for none): the word that it hears. A rank k that fails a simulation
  (`hand`) reads it; it is there (this run's), so k appends a line to its own
  ``nonfinite_fails.{k}`` (made written aside then renamed, its first line the run id;
  then one line per failure, tab-separated: simulation id, time step, rank 0's
  failures of it that k read at the attempt's HELLO in `nonfinite_kills`, the attempt
  as k counts them (`NonFiniteGuard.attempt`: HELLOs read; HELLO carries no attempt
  number), why) and goes on as rank 0 does: that sample, and the attempt's later
  non-finite ones here, dropped and not marked. It is not there (no launcher: external
  mode; or a file that could not be written): k raises `NonFiniteDataError` as
  before, since no one would fail the simulation.
* Rank 0's ingester reads the other ranks' files (`heard`: a listing of the directory,
  then a file read only when it changed) at its empty polls, its pumps and its puts
  blocked on a full buffer (a rank 0 held back hears too), at most every
  `HEAR_EVERY` seconds, and at each HELLO (before it: the new attempt's HELLO comes
  after the kill, so a failure handed before that kill is heard before the restart
  is admitted), and fails each simulation heard of as its own
  (`NonFiniteGuard.failed_elsewhere`): listed once per attempt for the launcher,
  whichever ranks failed it (rank 0's own failure of the same attempt, or two ranks'
  hand-offs, counted once: rank 0 has failed it since rank k's HELLO, its count grew;
  or it is still failed), and said to the other ranks (`nonfinite_kills`).
* A hand-off of an attempt whose HELLO rank 0 has not read yet (its own count of the
  simulation's attempts below the one handed: rank 0 behind on its socket) is held
  until it has (`NonFiniteGuard.helloed`), then judged. Judged at once it was taken,
  of a first attempt, for a failure before that attempt's HELLO (the HELLO, read
  after, was taken for a restart's, and the attempt failed twice); of a restart,
  while rank 0 was still on the attempt before, which it had failed, for that
  attempt's late echo, and dropped: the restart was never killed, its NaN step never
  marked on rank k, and it ended as a simulation whose data did not all arrive (work
  lost). A rank k that reads an attempt's HELLO only after rank 0 failed it (kept
  busy) hands the same count of rank 0's failures as for the restart; the attempt
  number tells the two apart: that hand-off is of the attempt rank 0 is on and has
  failed, dropped.

Rank 0 and rank k count alike since every attempt says HELLO to every receiver, each
client rank once (the count is the most HELLOs of one client rank, so a client rank's
HELLO read after another's of the same attempt does not count again). Limits: where an
attempt's HELLOs reached some ranks and not others (a process killed while it
connected), the counts differ from then on for that simulation. Rank k's count behind:
a hand-off is judged as before the attempt numbers (a restart's handed while rank 0
is on the failed attempt before it is dropped). Rank k's count ahead: a hand-off is
held until rank 0 reads one more HELLO of the simulation (a restart's), so the attempt
handed is not killed for it and ends as a simulation whose data did not all arrive
(the launcher's ``exit 0, data incomplete``, its failure policy applied then), and the
hand-off then fails the restart too; so does a late hand-off of an attempt that rank 0
failed itself. A hand-off of an attempt
that rank 0 did not fail (it died on its own, or was killed for another cause),
written after rank 0 read the restart's HELLO (rank k kept busy for a whole restart),
fails the restart too: a failed attempt too many, never a failure lost (as for rank
0's own queued messages, `NonFiniteGuard.hello`). A receiver outside a trainer has no
run id: an earlier study's word, if rank 0 did not clear it (`clear_nonfinite_handoffs`,
before it launches anything), is taken as this run's.

Shared file systems: the ranks may run on other nodes, whose clients cache a file's
attributes and a missing name (NFS). Every read of these files is a listing of the
directory then a fresh open (`nonfinite_kills.fresh_lines`), not a ``stat``: the open
is revalidated with the server (close-to-open: rank 0's line, appended and closed
before the kill, is read by rank k at the restart's HELLO, after the kill), and the
listing revalidates the directory, so a name made on another node is found (rank 0's
word, once written, is seen by rank k, which does not fail the training for want of
it). A file is made aside then renamed, and appended to with its writer's close
before anyone is told (no fsync: the other nodes read it through the server, not the
disk; a crashed node's lines are lost with its receiver). Untested on NFS here: a
server or mount that breaks close-to-open (``nocto``) brings back stale counts (a
restart's hand-off dropped, its data incomplete as above) and a missed word (rank k
fails as before). Cost: nothing on the data path; files only under
``nonfinite="fail"`` with a rendezvous directory and several ranks (`for_receiver`);
a listing and an open at rank 0's polls (at most every `HEAR_EVERY` seconds),
rank k's HELLOs and its failures.

Thread-safety: one object per receiver, used by its ingester only (one thread at a time).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

from melissa_trainer.stream.nonfinite_kills import FileKey, fresh_lines

__all__ = ["HANDOFF_FILE", "HEAR_EVERY", "NonfiniteHandoff", "clear_nonfinite_handoffs"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: rank 0's word that it hears; ``{HANDOFF_FILE}.{k}``: rank k's failures handed to it
HANDOFF_FILE = "nonfinite_fails"
#: seconds between two reads of the other ranks' files at rank 0's empty polls
HEAR_EVERY = 0.1


class NonfiniteHandoff:
    """The hand-off of receiver `rank` of `world` in `directory`, run `run_id` (module
    docstring): rank 0 `listen`s and reads (`heard`), the others `hand`."""

    def __init__(
        self, directory: str | os.PathLike[str], run_id: str | None, rank: int, world: int
    ) -> None:
        self._dir, self._run, self._rank, self._world = Path(directory), run_id or "-", rank, world
        self._written = False  # rank k: this run's file made (then appended to)
        #: rank 0: per other rank, (inode, size, mtime) last read, lines consumed, inode
        self._seen: dict[int, tuple[FileKey, int, int]] = {}

    @classmethod
    def for_receiver(
        cls,
        directory: str | os.PathLike[str] | None,
        run_id: str | None,
        rank: int,
        world: int,
        policy: str,
    ) -> NonfiniteHandoff | None:
        """The hand-off of a receiver under the `policy` for NaN (its ``nonfinite``), or
        None where there is none: one rank, no rendezvous directory, or a policy that
        fails no simulation."""
        if world < 2 or directory is None or policy != "fail":
            return None
        return cls(directory, run_id, rank, world)

    def listen(self) -> None:
        """Rank 0: a launcher reads its failures; say so to the other ranks (written
        aside then renamed). An OSError is logged: they then fail as before."""
        if not self._write(self._dir / HANDOFF_FILE, f"{self._run}\n"):
            logger.warning(
                "could not write %s in %s: a receiver of another rank that receives NaN or "
                "Inf under nonfinite='fail' will stop the training instead of handing the "
                "simulation's failure to rank 0",
                HANDOFF_FILE,
                self._dir,
            )

    def hand(self, simulation_id: int, time_step: int, why: str, seen: int, attempt: int) -> bool:
        """Rank k: hand the failure of attempt `attempt` (as k counts them:
        `NonFiniteGuard.attempt`) of `simulation_id` (at `time_step`, for `why`; rank 0
        having failed it `seen` times when k read that attempt's HELLO) to rank 0; False
        where it cannot (rank 0 does not hear this run, or the line could not be
        written: the caller raises `NonFiniteDataError`)."""
        _, lines = fresh_lines(self._dir / HANDOFF_FILE, None)  # (NFS: `fresh_lines`)
        if not lines or lines[0] != self._run:
            return False
        text = " ".join(why.split())  # (one line, no tab)
        line = f"{simulation_id}\t{time_step}\t{seen}\t{attempt}\t{text}\n"
        path = self._dir / f"{HANDOFF_FILE}.{self._rank}"
        if self._written:
            try:
                with path.open("a") as f:
                    f.write(line)
                return True
            except OSError as exc:
                logger.error("could not append to %s: %s", path, exc)
                return False
        self._written = self._write(path, f"{self._run}\n{line}")
        return self._written

    def heard(self) -> list[tuple[int, int, int, int, str]]:
        """Rank 0: (simulation id, time step, seen, attempt, why) of each failure handed
        by another rank since the last call (`hand`), in each rank's order; ``why``
        names the rank."""
        new: list[tuple[int, int, int, int, str]] = []
        try:  # (one listing for all: NFS, `fresh_lines`; the names, for no open in vain)
            names = set(os.listdir(self._dir))
        except OSError:
            names = None  # (each file tried)
        for rank in range(1, self._world):
            path = self._dir / f"{HANDOFF_FILE}.{rank}"
            if names is not None and path.name not in names:
                self._seen.pop(rank, None)  # (none yet: no failure there; or removed)
                continue
            seen = self._seen.get(rank)
            key, lines = fresh_lines(path, seen[0] if seen is not None else None, listed=True)
            if key is None or lines is None:  # (unreadable: read again next time; unchanged)
                continue
            # a new file (its inode) is read from its first failure on
            done = seen[1] if seen is not None and seen[2] == key[0] else 1
            self._seen[rank] = (key, max(done, len(lines)), key[0])
            if not lines or lines[0] != self._run:
                continue  # another run's
            for line in lines[done:]:
                fields = line.split("\t", 4)
                if len(fields) == 4:  # an older receiver's (no attempt: `helloed` of any)
                    fields.insert(3, "1")
                sid, t, kills, attempt, why = (fields + [""] * 4)[:5]
                numbers = (sid, t.removeprefix("-"), kills, attempt)
                if all(n.isdigit() for n in numbers):
                    why = f"{why} (receiver of rank {rank})"
                    new.append((int(sid), int(t), int(kills), int(attempt), why))
        return new

    def _write(self, path: Path, text: str) -> bool:
        """Write `text` to `path` aside then renamed (never read half-written); an
        OSError is logged, and False returned."""
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=self._dir)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
            return True
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    Path(tmp).unlink(missing_ok=True)
            logger.error("could not write %s: %s", path, exc)
            return False


def clear_nonfinite_handoffs(directory: str | os.PathLike[str]) -> None:
    """Remove an earlier run's hand-off files (rank 0, before it launches anything)."""
    for path in Path(directory).glob(f"{HANDOFF_FILE}*"):
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # (its run id still tells it apart, where there is one)
            logger.debug("removing %s: %s", path, exc)
