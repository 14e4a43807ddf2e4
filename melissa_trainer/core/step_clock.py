"""`StepClock`: how `core.wait_watch.WaitWatch`'s thread judges a span of steps (a
window's, `WaitWatch.stepping`): no step completed for `first` seconds, or 4 times the
slowest step seen completed, whichever is longer, is a stall; said again at each
doubling of that bound, then once the stalled step completes (or the judging stops
without it). The steps are read at the thread's looks (every `first` / 4 s): the step
lengths it measures are the looks' (a step shorter than a look counts as a look's
length divided by the steps it saw complete), so that no step pays for a clock.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["StepClock"]


class StepClock:
    """The watch thread's judgement of a span of steps (`WaitWatch.stepping`): `look`
    at each of its looks. Used by that thread only (the watch's lock held)."""

    def __init__(self, first: float) -> None:
        self.first = first
        self.key: tuple[int, int, int] | None = None  # what was judged at the last look
        self.done = 0  # the steps completed then
        self.since = 0.0  # when they were seen first (a look after they completed)
        self.bound = first
        self.slowest = 0.0  # the slowest step seen completed (seconds, at the looks)
        self.warned = False
        #: the steps' reader of the last span (read after it, to tell a step completed)
        self.read: Callable[[], int] | None = None

    def look(
        self, now: float, key: tuple[int, int, int] | None, done: int
    ) -> tuple[str, float, int] | None:
        """Judge the look at `now`: `key` the span, pauses and waits begun (None: not
        judged now), `done` the steps completed. ``("stalled", s, step)``: no step for
        `s` seconds, past the bound, `step` in progress; after a warning,
        ``("completed", s, step)``: that step completed `s` seconds after the one before,
        ``("went on", s, step)``: the judging stopped without it (an error, a wait, a
        pause); None: nothing to say."""
        if key is not None and key == self.key and done == self.done:
            waited = now - self.since
            if waited < self.bound:
                return None
            while self.bound <= waited:
                self.bound *= 2
            self.warned = True
            return "stalled", waited, done + 1
        said: tuple[str, float, int] | None = None
        if self.warned:
            kind = "completed" if done > self.done else "went on"
            said, self.warned = (kind, now - self.since, self.done + 1), False
        if key is not None and key == self.key and done > self.done:
            self.slowest = max(self.slowest, (now - self.since) / (done - self.done))
        self.key, self.done, self.since = key, done, now
        self.bound = max(self.first, 4 * self.slowest)
        return said
