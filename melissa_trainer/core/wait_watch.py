"""`WaitWatch`: a rank that waits long in a collective says so, instead of hanging silent.

A collective returns only once every rank has reached it. A rank stopped (SIGSTOP, a
debugger), hung, or busy for long elsewhere (a long save or load) holds the others in
it until the process group's timeout (torch's default: 30 minutes; users may pass
``InitProcessGroupKwargs(timeout=...)``), with nothing in the log. Wrapped in
`WaitWatch.waiting`, a wait that lasts more than `first` seconds logs a warning naming
what it waits for and what to check, again at twice that, four times..., and one line
when it ends after a warning. The watch only observes: the wait, its result and the
collectives run are the same with it.

One daemon thread per watch, started at a wait, asleep on a condition between waits
(arming and disarming a wait costs a lock and a notify, no thread start), ended after
`first` seconds without a wait (a trainer whose training ended keeps no thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["DEFAULT_FIRST_WARNING", "WaitWatch"]

logger = logging.getLogger("melissa_trainer.core.wait_watch")

#: seconds a rank waits in a collective before the first warning (then twice that...)
DEFAULT_FIRST_WARNING = 60.0


class WaitWatch:
    """Warns when a wait wrapped in `waiting` lasts more than `first` seconds, then at
    each doubling of that bound; `rank` names the waiting rank in the warnings.

    Not re-entrant: one wait at a time (the training thread's collectives)."""

    def __init__(self, rank: int, first: float = DEFAULT_FIRST_WARNING) -> None:
        if not first > 0:
            raise ValueError(f"WaitWatch first={first!r}: give a number of seconds > 0")
        self.rank, self.first = rank, float(first)
        self._cond = threading.Condition()
        self._what: str | None = None  # the wait in progress (None: none)
        self._since = 0.0
        self._waits = 0  # counts the waits begun: the thread tells one from the next
        self._warned = False  # the wait in progress was warned about
        self._thread: threading.Thread | None = None

    @contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """Watch the wait in the ``with`` block; `what` completes "waiting for ..."
        (e.g. "the other ranks' stop agreement")."""
        with self._cond:
            self._what, self._since, self._warned = what, time.monotonic(), False
            self._waits += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="melissa-wait-watch", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                warned, since = self._warned, self._since
                self._what, self._warned = None, False
                self._cond.notify_all()
            if warned:
                logger.warning(
                    "rank %d: %s arrived after %.0f s", self.rank, what, time.monotonic() - since
                )

    def _watch(self) -> None:
        with self._cond:
            while True:
                while self._what is None:
                    if not self._cond.wait(self.first) and self._what is None:
                        self._thread = None  # idle (training ended?): the next wait restarts it
                        return
                wait, what, bound = self._waits, self._what, self.first
                while self._waits == wait and self._what is not None:
                    waited = time.monotonic() - self._since
                    if waited < bound:
                        self._cond.wait(bound - waited)
                        continue
                    self._warned = True
                    logger.warning(
                        "rank %d has waited %.0f s for %s: another rank has not reached "
                        "it. Check for a stopped (SIGSTOP, a debugger) or hung rank, or a "
                        "long save or load on another rank; the wait ends with an error "
                        "only at the process group's timeout (torch's default 30 min; "
                        "InitProcessGroupKwargs(timeout=...))",
                        self.rank,
                        waited,
                        what,
                    )
                    bound *= 2
