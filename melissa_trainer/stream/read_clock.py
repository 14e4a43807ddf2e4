"""The cadence of a rank's training-thread reads of its buffer (`ReadClock`), kept by
its `StarvationWatch` (`starvation_watch`): rank 0 publishes it, so that another rank
tells a rank 0 busy with its own steps from one blocked in the step agreement, which
reads nothing (`study.starvation`). The same clock is told by the trainer when its
training thread is in work of its own, between the collectives of a step (a hook call,
an action point: `work_began`): a rank 0 there, a slow hook on its main process alone,
say, comes back by itself. The training thread's, but `ReadClock.published` and
`own_work`: any thread.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["READ_HISTORY", "ReadClock"]


#: the reads over which `ReadClock` keeps the longest time away: several windows' worth
#: (a window reads stop_sync_steps x gradient_accumulation_steps batches, 8 by default)
READ_HISTORY = 1024


class ReadClock:
    """The cadence of a rank's reads of its buffer (module docstring), told by its
    training thread at each `wait_for` (`came`): how many reads it began, when it last
    came to its source (a read, or a wait for one), and the longest it stayed away
    between two reads over its last `READ_HISTORY` reads (what its steps take: the
    ranks read a window's batches, then run its steps, which read nothing). A wait for
    data is not time away, nor is work of its own, which the trainer tells it of
    (`work_began`, `work_ended`: module docstring; excused on its own). `came` and
    those are the training thread's; `published` and `own_work` read tuples that they
    replace whole, so any thread may call them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._away: deque[float] = deque(maxlen=READ_HISTORY)
        self._last: float | None = None  # when the training thread last came
        #: (reads begun, when it last came or None, longest away or None)
        self._said: tuple[int, float | None, float | None] = (0, None, None)
        #: (in work of its own since, or None; when it last left such work, or None)
        self._work: tuple[float | None, float | None] = (None, None)
        self._own = 0.0  # seconds of own work ended so far (outermost spans)
        self._own_then = 0.0  # seconds of own work, ended or not, as of `_last`

    @property
    def count(self) -> int:
        """The reads begun so far (the one in progress, or waited in, counted)."""
        return self._said[0]

    def work_began(self) -> float | None:
        """The training thread begins work of its own (a hook call, an action point);
        returns what `work_ended` is given at its end: the start of the work it is
        already in, or None (nested work is one: the outermost's start is kept). Costs a
        clock read and a tuple, once per hook dispatch (several times a step)."""
        since, left = self._work
        if since is None:
            self._work = (self._clock(), left)
        return since

    def work_ended(self, outer: float | None) -> None:
        """The work whose `work_began` returned `outer` is done (in a ``finally``)."""
        if outer is None:
            now, since = self._clock(), self._work[0]
            self._own += 0.0 if since is None else now - since
            self._work = (None, now)

    def came(self, read: bool) -> None:
        """The training thread came to its source: to `read` (a read begins), or to
        wait for data (a read found too few). The time away between two reads leaves
        out the own work between them (excused on its own: `study.starvation`)."""
        now, since = self._clock(), self._work[0]
        own = self._own + (0.0 if since is None else now - since)
        reads, _, longest = self._said
        if read:
            reads += 1
            if self._last is not None:
                away = max(0.0, now - self._last - (own - self._own_then))
                full = len(self._away) == self._away.maxlen
                dropped = self._away[0] if full else None
                self._away.append(away)
                if longest is None or away >= longest:
                    longest = away
                elif dropped is not None and dropped >= longest:  # (the longest forgotten)
                    longest = max(self._away)
        self._last, self._own_then = now, own
        self._said = (reads, now, longest)

    def published(self, now: float) -> dict[str, Any]:
        """What rank 0 publishes (`study.progress`) of its reads as of `now` (the
        clock's seconds): ``reads``, ``away_for`` (seconds since it last came, None
        before the first read) and ``away_max`` (None before the second read)."""
        reads, came, longest = self._said
        return {
            "reads": reads,
            "away_for": _ago(now, came),
            "away_max": None if longest is None else round(longest, 1),
        }

    def own_work(self, now: float) -> dict[str, Any]:
        """What rank 0 publishes of its own work as of `now`: ``own_work_for`` (seconds
        it has been in it, None when it is not) and ``own_work_ago`` (seconds since it
        last left it, None before). Any thread, as `published`."""
        since, left = self._work
        return {"own_work_for": _ago(now, since), "own_work_ago": _ago(now, left)}


def _ago(now: float, then: float | None) -> float | None:
    """Seconds from `then` to `now`, to a tenth (None for None)."""
    return None if then is None else round(max(0.0, now - then), 1)
