"""Every rank's receiver heard by the launcher: the other ranks' heartbeats handed to rank 0.

A study's launcher runs on rank 0 and judged a simulation's silence by rank 0's receiver
alone (its per-simulation message count, `Receiver.activity`). With time steps routed
over the ranks (`wire.routing`) a simulation may send nothing to receiver 0 for a long
time, or ever: a steady-state solver (one step, to rank ``s % W``), a solver that numbers
its outputs every W-th iteration (all of them to one rank), a hang right after a first
step that went to another rank. The launcher then took such a simulation for one that
had sent nothing yet: judged by the start-up bound instead of the bound between two
messages (a hang on receiver 1 killed after ``startup_timeout``, 600 s by default,
instead of ``silence_floor`` or a numeric ``simulation_timeout``; said "no message
yet"), and, under a numeric `simulation_timeout` that also bounds the start-up, a
healthy simulation streaming to receiver 1 only killed as hung once that bound passed.

Now each other rank k hands its receiver's counts to rank 0 through the rendezvous
directory (shared by every rank and every simulation already, on one node or many), as
`nonfinite_handoff` hands its failures:

* rank k (`ActivityPublisher`, a thread of its study): at most every `PUBLISH_EVERY`
  seconds, when its counts or its wait for buffer room changed, rewrites
  ``activity.{k}`` (written aside then renamed: a reader sees the old file or the new,
  never half of one): a first line ``{run id}\\t{1 if waiting for room else 0}``, with
  ``\\tfinal`` added by its last write (at its study's stop, once its receiver stopped),
  then one line ``{simulation id}\\t{messages}\\t{steps}\\t{refused}\\t{first}`` per
  simulation its receiver holds a ledger of (those not finished yet, and given up:
  bounded by the simulations running and given up, not by the study): its messages, the
  steps it received, of which refused for NaN or Inf (`IngestQueries.held_samples`), and
  the first time step it refused for NaN or Inf (``-``: none; `NonFiniteGuard.first_step`);
  and one per simulation archived since its last write (messages ``-``: its heartbeat
  is over; `IngestQueries.archived_samples`; after a resume, the checkpoint's, once),
  and, in its last write, one per simulation archived at all (O(study), once: what the
  account reads), so that the steps a ledger took in after one write and before its
  archiving are said (before, never: the account undercounted them). The archived are
  said as runs of consecutive ids (`activity_file`): 10^6 of them, their counts alike or
  alternating, in 48 B or 2.0 MB, parsed in 0.45 or 0.65 s, against 14.9 MB and 2.7 s
  one line each (`benchmarks/final_activity_file.py`, a loaded 2-core machine).
  A line without its first refused step (an older writer's) still reads, as none;
* rank 0 (`OtherRanksActivity`, read by the launcher's thread at each tick): lists the
  directory, opens afresh each other rank's file of this run (a listing then an open,
  not a ``stat``: on NFS the open is revalidated with the server, close-to-open; but a
  file read marked final, which its rank never writes again, is parsed once: kept while
  its inode, mtime and size stay, a ``stat`` at each read after) and
  adds its counts to rank 0's own; a simulation's heartbeat is the sum over the ranks
  (it changes when any rank took in a message of it); the receivers wait for room
  (`backpressured`: the silence is the trainer's) when any rank's does. It keeps the
  last steps each rank said of each simulation (`samples`: a ledger archived there
  leaves its file, its steps stay said), which the study's end-of-run account adds to
  rank 0's (`launcher.account`): before, a simulation whose samples all went to other
  ranks and that failed was said "failed with no sample received". It keeps the first
  step each rank refused too: the account's "from time step t on" is the first over
  every rank (before, rank 0's: a later step, or none, when the first went elsewhere).
  At the study's end rank 0 waits, bounded (`wait_final`), for each other rank's last
  write (marked final) before the account reads them: a rank's last steps, taken in
  within `PUBLISH_EVERY` s of its stop, were otherwise missed by a read that came first;
  no longer for a rank whose process is known ended (its pid dead on this host).

No message on the data path, no collective: the training loop is untouched. Cost: one
small file rewritten by each other rank at most every `PUBLISH_EVERY` s while messages
come, a listing and W-1 small reads per launcher tick. Latency: a message taken in on
rank k is heard by the launcher at most `PUBLISH_EVERY` s plus a tick later; the silence
bounds are seconds at least, and a gap seen longer by that much only lengthens the
derived bound (`launcher.silence`). What rank 0 still knows alone: a simulation's first
message time (`DataReport.first_message_at`: a start-up whose first step went to another
rank is timed to the tick that heard it, a lower bound to within a poll), and which
simulations are complete (`completed_reports`).

The file's format, written and read, is `activity_file`'s. Thread-safety: an
`ActivityPublisher` is its own thread; `OtherRanksActivity` is read by the launcher's
thread only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from melissa_trainer.stream.activity_file import (
    ACTIVITY_FILE,
    Firsts,
    RankActivity,
    Samples,
    read_activity,
    write_activity,
)

__all__ = ["FINAL_WAIT", "PUBLISH_EVERY", "ActivityPublisher", "OtherRanksActivity"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: seconds between two writes of a rank's counts, at most (module docstring: latency)
PUBLISH_EVERY = 0.2
#: seconds rank 0 waits, at most, for the other ranks' last writes at the study's end
#: (`wait_final`): they stop their streams when rank 0 does, before its last simulations'
#: wait (`study_stop.STOP_WAIT`); bounded: a rank that died, or cannot write, says no last word
FINAL_WAIT = 5.0
#: seconds between two looks at the other ranks' files while `wait_final` waits
_FINAL_POLL = 0.05


def _never(rank: int) -> bool:
    """No rank is known ended (`OtherRanksActivity.wait_final`'s default)."""
    return False


class ActivityPublisher(threading.Thread):
    """Rank `rank`'s thread that hands its receiver's counts (`activity`), its wait
    for room (`waiting`) and its steps (`samples`: `IngestQueries.held_samples`, and
    `archived`: `IngestQueries.archived_samples`, the ledgers archived since its last
    write; the last write says all of them) to rank 0 (module docstring). `stop` ends it
    (joined), having written its last counts.

    A write that fails is logged once as a WARNING (rank 0's launcher then hears
    nothing of this rank: its simulations' silence is judged by rank 0's receiver only),
    and tried again at the next change.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        run_id: str | None,
        rank: int,
        activity: Callable[[], Mapping[int, int]],
        waiting: Callable[[], bool],
        every: float = PUBLISH_EVERY,
        samples: Callable[[], Samples] = dict,
        first_refused: Callable[[], Firsts] = dict,
        archived: Callable[[int], tuple[Samples, int]] | None = None,
    ) -> None:
        super().__init__(name=f"melissa-activity-{rank}", daemon=True)
        self.path = Path(directory) / f"{ACTIVITY_FILE}.{rank}"
        self._run_id, self._activity, self._waiting, self._every = run_id, activity, waiting, every
        self._samples, self._first_refused = samples, first_refused
        #: the simulations archived from an index on, and the next index
        #: (`IngestQueries.archived_samples`); where the next write starts (moved on once
        #: a write says them, or nothing changed: a write that fails says them again)
        self._archived, self._archived_from = archived, 0
        self._stopping = threading.Event()
        #: the last written (counts, waiting, samples, first refused steps); at first
        #: nothing: no file is written before a first message
        self._said: tuple[Mapping[int, int], bool, Samples, Firsts] = ({}, False, {}, {})
        self._warned = False

    def run(self) -> None:
        while not self._stopping.wait(self._every):
            self.publish()

    def publish(self, final: bool = False) -> None:
        """Write the counts now, if they changed since the last write; `final`: the last
        write, marked so, whatever changed (rank 0's `wait_final` waits for it)."""
        # The archived first: one archived after this read is in the next one's. The last
        # write says every one (the account reads it, `wait_final`): a write that lists
        # one is replaced within `every` s, perhaps before rank 0 read it.
        start = 0 if final else self._archived_from
        gone, after = self._archived(start) if self._archived else ({}, 0)
        counts = dict(self._activity())
        samples = {**gone, **self._samples()}
        firsts = self._first_refused()  # (only those said: the file's size is O(held))
        held = {sid: t for sid, t in firsts.items() if sid in counts or sid in gone}
        now = (counts, bool(self._waiting()), samples, held)
        if now == self._said and not final:
            self._archived_from = after
            return  # (nothing new; nothing at all before a first message: no file)
        try:
            write_activity(self.path, self._run_id, *now, final=final)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "could not write %s (%s): the launcher on rank 0 does not hear this "
                    "rank's receiver; a simulation whose steps come here only may be "
                    "judged silent",
                    self.path,
                    exc,
                )
            return
        self._said, self._archived_from = now, after

    def stop(self) -> None:
        """End the thread (at most one write it is doing), then write its last counts,
        marked final: rank 0's account waits for them (`OtherRanksActivity.wait_final`),
        so the caller stops its receiver first (its last steps taken in are in them)."""
        self._stopping.set()
        if self.is_alive():
            self.join()
        self.publish(final=True)


class OtherRanksActivity:
    """Rank 0's reading of the other ranks' heartbeat files in `directory` for run
    `run_id` (module docstring): `add` sums them into rank 0's counts, `waiting` says
    whether any of them waits for room (as of the last `add`), `samples` the steps they
    said of each simulation, as of their last word on it, `first_refused` the first step
    any refused, `said_of` each rank's word on one simulation, `wait_final` waits for
    their last writes. A file that does not parse is said once as a WARNING and left
    out."""

    def __init__(self, directory: str | os.PathLike[str], run_id: str | None) -> None:
        self._dir, self._run_id = Path(directory), run_id
        self._waiting = False
        self._warned: set[str] = set()
        #: file name -> simulation id -> (steps, refused): its last word on each
        self._said: dict[str, dict[int, tuple[int, int]]] = {}
        #: file name -> simulation id -> the first step it refused (said once, kept)
        self._firsts: dict[str, dict[int, int]] = {}
        self._final: set[str] = set()  # (the files read marked final)
        #: file name -> (its identity when read, its read) of each file read marked
        #: final: a rank's last write, O(study) (`ActivityPublisher.publish`), parsed
        #: once though read at every `add` (`wait_final`'s, then the account's)
        self._kept: dict[str, tuple[tuple[int, int, int], RankActivity]] = {}

    def add(self, own: Mapping[int, int]) -> dict[int, int]:
        """`own` (rank 0's counts) plus every other rank's, per simulation."""
        total = dict(own)
        waiting = False
        try:  # (a listing first: a file made on another node is found, module docstring)
            names = [n for n in os.listdir(self._dir) if n.startswith(f"{ACTIVITY_FILE}.")]
        except OSError:
            names = []  # (the directory gone: the study is ending)
        for name in names:
            if not name[len(ACTIVITY_FILE) + 1 :].isdigit():
                continue  # (another name: one being written aside starts with a dot)
            try:
                read, fresh = self._read(name)
            except (OSError, ValueError) as exc:
                if name not in self._warned:
                    self._warned.add(name)
                    logger.warning("the launcher leaves out %s: %s", name, exc)
                continue
            if read is None:
                continue
            waiting = waiting or read.waiting
            for sid, n in read.counts.items():
                total[sid] = total.get(sid, 0) + n
            if not fresh:
                continue  # (its last write, kept: said already, O(study))
            self._said.setdefault(name, {}).update(read.samples)
            self._firsts.setdefault(name, {}).update(read.first_refused)
            if read.final:
                self._final.add(name)
        self._waiting = waiting
        return total

    def _read(self, name: str) -> tuple[RankActivity | None, bool]:
        """File `name` read (`read_activity`), and True; or its read kept, and False,
        when it was marked final and its identity (inode, mtime, size: a rewrite renames
        another file in) is unchanged: a rank writes nothing after its last write.

        Raises:
            OSError, ValueError: as `read_activity`.
        """
        path = self._dir / name
        kept = self._kept.get(name)
        if kept is not None:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_ino, st.st_mtime_ns, st.st_size) == kept[0]:
                return kept[1], False
            del self._kept[name]
        try:  # (its identity before the read: a file renamed in between is read again)
            st = os.stat(path)
        except FileNotFoundError:
            return None, True
        read = read_activity(path, self._run_id)
        if read is not None and read.final:
            self._kept[name] = ((st.st_ino, st.st_mtime_ns, st.st_size), read)
        return read, True

    def samples(self) -> dict[int, tuple[int, int]]:
        """Simulation id -> (steps, of which refused) summed over the other ranks, each
        rank's last word on it as of the last `add` (a simulation archived there since
        keeps what it said while held)."""
        total: dict[int, tuple[int, int]] = {}
        for said in self._said.values():
            for sid, (steps, refused) in said.items():
                had = total.get(sid, (0, 0))
                total[sid] = (had[0] + steps, had[1] + refused)
        return total

    def first_refused(self) -> dict[int, int]:
        """Simulation id -> the first time step another rank refused for NaN or Inf
        (the least over the ranks), as of the last `add`."""
        first: dict[int, int] = {}
        for said in self._firsts.values():
            for sid, t in said.items():
                first[sid] = min(t, first.get(sid, t))
        return first

    def said_of(self, simulation_id: int) -> list[tuple[int, int, int]]:
        """(rank, steps, of which refused) of each other rank that said `simulation_id`,
        in rank order, its last word as of the last `add`."""
        return sorted(
            (int(name[len(ACTIVITY_FILE) + 1 :]), *said[simulation_id])
            for name, said in self._said.items()
            if simulation_id in said
        )

    def wait_final(
        self, ranks: Iterable[int], bound: float = FINAL_WAIT, gone: Callable[[int], bool] = _never
    ) -> list[int]:
        """Read the files until each of `ranks` wrote its last (`ActivityPublisher.stop`:
        marked final), `bound` s at most (a poll: they may be on other nodes), and no
        longer for a rank `gone` says has ended (its process known dead, on this host:
        what it wrote shows at once; one on another host may still write: waited for).
        Returns the ranks not heard final, each said in one WARNING (the account may
        then miss their last steps): as ended, or as silent past `bound`."""
        deadline, wanted = time.monotonic() + bound, list(ranks)
        ended: set[int] = set()
        while True:
            self.add({})
            missing = [k for k in wanted if f"{ACTIVITY_FILE}.{k}" not in self._final]
            ended.update(k for k in missing if k not in ended and gone(k))
            if ended.issuperset(missing) or time.monotonic() >= deadline:
                break
            time.sleep(_FINAL_POLL)
        if ended.intersection(missing):
            self.add({})  # (a last word written as it ended, after the read above)
            missing = [k for k in wanted if f"{ACTIVITY_FILE}.{k}" not in self._final]
        for group, why in (
            ([k for k in missing if k in ended], ": {} (known dead on this host)"),
            ([k for k in missing if k not in ended], f" within {bound:g} s of the study's end"),
        ):
            if group:
                whose = "its process ended" if len(group) == 1 else "their processes ended"
                logger.warning(
                    "the receiver of %s wrote no last counts%s: the study's account says "
                    "its steps as of its last heartbeat (it may miss the last ones)",
                    ("rank " if len(group) == 1 else "ranks ") + ", ".join(map(str, group)),
                    why.format(whose),
                )
        return missing

    def waiting(self) -> bool:
        """Whether another rank's receiver waited for room at the last `add`."""
        return self._waiting
