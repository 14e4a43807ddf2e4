"""A receiver's idle clock and its stall watchdog: no silent hang.

The clock is how long the socket has been found empty since the last message arrived.
The ingesting thread updates it at each empty poll only (comparing the message count
with the one at the previous empty poll), so it costs nothing per message; time spent
blocked on a full buffer makes no empty poll and does not count. Other threads read it
(`idle_seconds`: the launcher decides that an exited simulation's data is not coming).

An explained silence is not a stall. `IdleClock.excuse`, when set (a `Study` sets it:
the stream knows nothing of launchers, so it is a plain callable), is asked each time
the silence is past `stall_timeout`: given the idle seconds, it returns what the silence
waits for, in words (e.g. simulations still within their start-up allowance, or queued
by a scheduler), or None when it cannot explain it. An explained silence is logged once
(a WARNING naming what it waits for) and not failed; the callable must bound its own
excuses (the launcher kills a solver past its start-up allowance, and its answer then
changes). Without one (external mode) a silence past `stall_timeout` fails as always.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from melissa_trainer.stream.ingest import Ingest

__all__ = ["IdleClock", "SilenceExcuse", "StallError"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: the idle seconds -> what the silence waits for, or None: not explained (a stall).
#: Called from the ingesting thread at each empty poll past `stall_timeout`: cheap,
#: thread-safe, and never a wait.
SilenceExcuse = Callable[[float], str | None]

#: an empty poll older than this says nothing about now (the ingester is elsewhere)
_FRESH = 2.0


class StallError(RuntimeError):
    """No message arrived for `stall_timeout` seconds while simulations were expected."""


def check_stall_timeout(value: object) -> float | None:
    """`stall_timeout` as seconds, or None; ValueError naming the field otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(
            f"stall_timeout must be a number of seconds > 0 or None (never), not {value!r}"
        )
    return float(value)


class IdleClock:
    """See the module docstring. `empty_poll` from the ingesting thread only;
    `idle_seconds` from any thread (a best-effort read of three floats); `excuse` is
    set from any thread (one attribute, read by the ingesting thread)."""

    def __init__(self, stall_timeout: float | None, excuse: SilenceExcuse | None = None) -> None:
        self.stall_timeout = check_stall_timeout(stall_timeout)
        #: what may explain a silence past `stall_timeout` (module docstring)
        self.excuse = excuse
        self._told = -math.inf  # the silence (its `_since`) already said to be explained
        self._since = time.monotonic()  # the first empty poll after the last message
        self._messages = -1  # the message count at that poll
        self._last = -math.inf  # the last empty poll

    def empty_poll(self, messages: int) -> float:
        """The socket was found empty, `messages` received so far: the idle seconds."""
        now = self._last = time.monotonic()
        if messages != self._messages:
            self._messages, self._since = messages, now
        return now - self._since

    def idle_seconds(self, messages: int) -> float:
        """Seconds since the last message while the socket is found empty: 0 while
        messages flow or while no empty poll came lately (waiting for buffer room)."""
        now = time.monotonic()
        if messages != self._messages or now - self._last > _FRESH:
            return 0.0
        return max(0.0, now - self._since)

    def check(self, idle: float, ingest: Ingest) -> None:
        """Raise `StallError` naming what `ingest` waits for if `idle` is past the
        timeout and `excuse` does not explain it (the caller checks that the stream has
        not ended). An explained silence is logged once per silence."""
        if self.stall_timeout is None or idle <= self.stall_timeout:
            return
        excuse = self.excuse
        why = None if excuse is None else excuse(idle)
        if why is not None:
            if self._told != self._since:
                self._told = self._since
                logger.warning(
                    "no message for %.0f s (past stall_timeout=%g), not a stall: %s. "
                    "Said once per silence",
                    idle,
                    self.stall_timeout,
                    why,
                )
            return
        waiting = ingest.unfinished()
        shown = "; ".join(f"simulation {s}: {ingest.describe(s)}" for s in waiting[:8])
        more = f" and {len(waiting) - 8} more" if len(waiting) > 8 else ""
        expected = "an unset number of" if ingest.expected is None else str(ingest.expected)
        raise StallError(
            f"no message for {idle:.0f} s (stall_timeout={self.stall_timeout}) and the "
            f"stream has not ended: {ingest.simulations_finished} of {expected} expected "
            f"simulations finished, {len(ingest.abandoned)} abandoned; waiting for "
            f"{shown or 'simulations that never said HELLO'}{more}. Raise stall_timeout "
            f"(or None) if the solvers are silent longer than that"
        )
