"""`WaitWatch`: a rank that waits long in a collective says so, instead of hanging silent.

A collective returns only once every rank has reached it. A rank stopped (SIGSTOP, a
debugger), hung, or busy for long elsewhere (a long save or load) holds the others in
it until the process group's timeout (torch's default: 30 minutes; users may pass
``InitProcessGroupKwargs(timeout=...)``), with nothing in the log. Wrapped in
`WaitWatch.waiting`, a wait that lasts more than `first` seconds logs a warning naming
what it waits for and what to check, again at twice that, four times..., and one line
when it ends after a warning. The watch only observes: the wait, its result and the
collectives run are the same with it.

Each wait names its collective and its usual cause (`waiting`'s `what` and `usual`): the
stop agreement's is a rank still waiting for its data (`AGREEMENT_USUAL`), a checkpoint's
a rank still writing or reading its files (`CHECKPOINT_USUAL`), a log's and the other
collectives among a window's steps a rank still waiting for its data or running its steps
(`STEPS_USUAL`), a validation's a rank still evaluating (`EVAL_USUAL`). Which rank is late is
told by the collective: every waiting rank warns, so the late ones are those that do
not, and the warning says how to find them; with a `RollCall` (`WaitWatch.roll`: the
launcher's store, `trainer.roll_call`) it names them. Each rank's watcher thread
publishes the number of the wait it sees in progress (this rank's count of waits: the
same sequence on every rank, the collectives being run in lockstep), and a warning names
the ranks whose number is behind: not seen at this wait ("likely": one that arrived
within the last look has not published yet). The training thread never talks to it.
One watch serves every watched collective of a trainer (`StopSync.watch`, also used by
`trainer.rank_reports` for a checkpoint's, `trainer.reporting`, the hooks'): set its
`first` there, for every wait at once. A wait is watched on every rank or on none (the
numbers must match): callers watch a collective only when it runs on every rank.

One daemon thread per watch, started at a wait, that looks every `first` / 4 seconds
(a warning comes `first` to 1.25 `first` after the wait began); arming and disarming a
wait take an uncontended lock and wake no thread (the stop agreement waits at every
window: a notify there woke the watcher, GIL and all, each time), and the thread ends
after `first` seconds without a wait (a trainer whose training ended keeps no thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = [
    "AGREEMENT_USUAL",
    "CHECKPOINT_USUAL",
    "DEFAULT_FIRST_WARNING",
    "EVAL_USUAL",
    "GROUP_TIMEOUT_ENDS",
    "STEPS_USUAL",
    "RollCall",
    "WaitWatch",
]

logger = logging.getLogger("melissa_trainer.core.wait_watch")

#: seconds a rank waits in a collective before the first warning (then twice that...)
DEFAULT_FIRST_WARNING = 60.0

#: the usual, harmless cause of a long wait at the stop agreement (`waiting`'s default)
AGREEMENT_USUAL = (
    "A rank still waiting for its data (a slow or queued simulation: its own log says so) "
    "is the usual cause and harmless"
)
#: the usual cause of a long wait at a checkpoint's collectives (its save or its load)
CHECKPOINT_USUAL = (
    "A rank still writing or reading its checkpoint files (a slow or busy file system) "
    "is the usual cause"
)
#: the usual cause of a long wait at a collective among a window's steps (a log's figures,
#: the wall-clock budget's agreement, the per-simulation losses' reduction): on a GPU the
#: host first waits there for the peers' steps, so for a peer still waiting for its data
#: (taken before its window's steps)
STEPS_USUAL = (
    "A rank still waiting for its data (a slow or queued simulation: its own log says so) "
    "or still running its steps is the usual cause and harmless"
)
#: the usual cause of a long wait at a validation's collectives
EVAL_USUAL = (
    "A rank still evaluating its share of eval_dataset (or its hooks' eval_figures), or "
    "still waiting for its data before the steps that came first, is the usual cause"
)
#: how to find the rank that holds the others, and what happens if none comes
_WHAT_TO_DO = (
    "otherwise check for a stopped (SIGSTOP, a debugger) or hung rank, or a long save or "
    "load on another rank. Every rank that waits says so: the late ones are those that do "
    "not; the ranks' processes in state T (`ps -o pid,stat,args`) are "
    "stopped (`kill -CONT PID` resumes one), a hung one's stack shows with `py-spy dump "
    "--pid PID`"
)
#: how a watched collective's wait ends if no rank comes (`WaitWatch`'s `ends` default)
GROUP_TIMEOUT_ENDS = (
    "The wait ends with an error only at the process group's timeout (torch's default "
    "30 min; InitProcessGroupKwargs(timeout=...))"
)


class RollCall(Protocol):
    """Where each rank's waits are, shared between ranks (`WaitWatch.roll`). Called from
    the watch's thread only; never raises (an unreachable store: None from `late`)."""

    def arrived(self, wait: int) -> None:
        """This rank is at its wait number `wait` (its count of waits begun)."""

    def late(self, wait: int) -> list[int] | None:
        """The other ranks not seen at wait number `wait` or later; None: unknown."""


class WaitWatch:
    """Warns when a wait wrapped in `waiting` lasts more than `first` seconds, then at
    each doubling of that bound; `rank` names the waiting rank in the warnings.

    Not re-entrant: one wait at a time (the training thread's collectives). `roll`, when
    given, names the late ranks in the warnings (see the module docstring)."""

    def __init__(
        self,
        rank: int,
        first: float = DEFAULT_FIRST_WARNING,
        roll: RollCall | None = None,
        ends: str = GROUP_TIMEOUT_ENDS,
    ) -> None:
        if not first > 0:
            raise ValueError(f"WaitWatch first={first!r}: give a number of seconds > 0")
        self.rank, self.first = rank, float(first)
        self._lock = threading.Lock()
        self._what: str | None = None  # the wait in progress (None: none)
        self._usual = AGREEMENT_USUAL  # its usual cause
        self._since = 0.0
        self._waits = 0  # counts the waits begun: the thread tells one from the next
        self._warned = False  # the wait in progress was warned about
        self._thread: threading.Thread | None = None
        self.roll = roll
        self.ends = ends  # how its waits end if no rank comes (a sentence: the warnings')

    @contextmanager
    def waiting(self, what: str, usual: str = AGREEMENT_USUAL) -> Iterator[None]:
        """Watch the wait in the ``with`` block; `what` completes "waiting for ..."
        (e.g. "the other ranks at the stop agreement"), `usual` (a sentence) names the
        usual cause of a long one, said before the others (`_WHAT_TO_DO`). A `waiting`
        begun while another is in progress (nested: never the trainer's) is not watched,
        the one in progress still is: the watch never changes what runs."""
        with self._lock:
            if self._what is not None:  # nested: the wait in progress stays the watched one
                nested = True
            else:
                nested = False
                self._what, self._since, self._warned = what, time.monotonic(), False
                self._usual = usual
                self._waits += 1
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._watch, name="melissa-wait-watch", daemon=True
                    )
                    self._thread.start()
        if nested:
            yield
            return
        ended = "ended with an error"  # (what the wait did, if it did not return)
        try:
            yield
            ended = "arrived"
        finally:
            with self._lock:
                warned, since = self._warned, self._since
                self._what, self._warned = None, False
            if warned:
                waited = time.monotonic() - since
                logger.warning("rank %d: %s %s after %.0f s", self.rank, what, ended, waited)

    def _watch(self) -> None:
        look = self.first / 4
        seen, bound, idle_since = -1, self.first, time.monotonic()
        published = -1  # the last wait told to `roll`
        while True:
            time.sleep(look)
            with self._lock:
                now = time.monotonic()
                if self._what is None:
                    if self._waits == seen and now - idle_since >= self.first:
                        self._thread = None  # idle (training ended?): the next wait restarts it
                        return
                    if self._waits != seen:
                        seen, idle_since = self._waits, now
                    continue
                if self._waits != seen:  # another wait than the one looked at last
                    seen, bound = self._waits, self.first
                idle_since = now
                waited = now - self._since
                warn = waited >= bound
                self._warned |= warn
                what, usual = self._what, self._usual
            roll = self.roll
            if roll is not None and published != seen:
                published = seen
                roll.arrived(seen)
            if not warn:
                continue
            late = roll.late(seen) if roll is not None else None
            ranks = f"rank{'s' if late and len(late) > 1 else ''} {', '.join(map(str, late or []))}"
            named = f" (likely late: {ranks})" if late else ""
            logger.warning(
                "rank %d has waited %.0f s for %s: another rank%s has not reached it. %s; %s. %s",
                self.rank,
                waited,
                what,
                named,
                usual,
                _WHAT_TO_DO,
                self.ends,
            )
            while bound <= waited:
                bound *= 2
