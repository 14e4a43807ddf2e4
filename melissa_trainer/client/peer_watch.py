"""Whether each receiver of a waiting client is connected (`PeerWatch`), and when a
wait says that it waits on one gone (`notice_after`, `notice_due`).

Read by the two waits that must tell a trainer gone from a slow one: a close's
(`patience.CloseWait`, whose module docstring says what the client sees of the
trainer's process) and a blocked send's (`send_wait`). What it reads is the sockets'
monitors, `handshake.Handshakes` (ZeroMQ allows one per socket); the notes its words
take, `handshake_notes`.

Not thread-safe: used by the thread that waits, holding the client's socket lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.handshake_notes import gone_cause, never_note

__all__ = ["NOTICE_AFTER", "Notice", "PeerWatch", "notice_after", "notice_due"]

#: seconds a receiver stays disconnected before a close waiting on it says so, once
#: (`notice_after`): a trial's close waited 181 s for a killed trainer without a word
NOTICE_AFTER = 5.0
#: ``notice(endpoints down, since, seconds the wait may last still, the bound that ends
#: it)``: what a `CloseWait` calls once (`CloseWait`'s `notice`); `since` is the
#: `time.monotonic()` of the first disconnection, the seconds None when nothing bounds
#: the wait, the bound "ClientTuning.disconnected_timeout=60.0 s" or its close_timeout's
Notice = Callable[[tuple[str, ...], float, float | None, str], None]


def notice_after(disconnected_timeout: float | None) -> float:
    """Seconds a receiver is disconnected before a close says that it waits on it:
    `NOTICE_AFTER`, or half `disconnected_timeout` if that is shorter (said before the
    wait ends, whatever the setting)."""
    if disconnected_timeout is None:
        return NOTICE_AFTER
    return min(NOTICE_AFTER, disconnected_timeout / 2)


def notice_due(
    watch: PeerWatch, disconnected: float | None, deadline: float | None, deadline_bound: str
) -> tuple[tuple[str, ...], float, float | None, str] | None:
    """The arguments of a `Notice` (a close's, `CloseWait`, or a blocked send's,
    `send_wait`) once a receiver has been down `notice_after` seconds (counted from the
    watch's start, as `PeerWatch.gone` counts), else None: the wait ends when it has
    been down `disconnected` seconds or at `deadline` (`time.monotonic()`; the bound
    then said is `deadline_bound`, "ClientTuning.close_timeout=60.0 s"), whichever
    comes first (None: no bound)."""
    down = watch.down_at()
    if down is None:
        return None
    now = time.monotonic()
    counted = now - max(down[1], watch.started)
    if counted < notice_after(disconnected):
        return None
    left, bound = [], ""
    if disconnected is not None:
        left.append(disconnected - counted)
        bound = f"ClientTuning.disconnected_timeout={disconnected} s"
    if deadline is not None and (not left or deadline - now < left[0]):
        left.append(deadline - now)
        bound = deadline_bound
    return down[0], down[1], max(min(left), 0.0) if left else None, bound


class PeerWatch:
    """Whether each socket's receiver is connected, as the sockets' monitors say
    (`Handshakes`, the one reader of each: ZeroMQ allows one monitor per socket).

    A receiver's disconnection counts from when the watch began at the earliest: a wait
    gives a receiver `disconnected_timeout` seconds from its start (a trainer starting
    late, a reconnection under way), as a monitor set up then would.

    Args:
        handshakes: the monitors of the client's sockets, in receiver order.
        endpoints: their endpoints (for messages).
    """

    def __init__(
        self, handshakes: Handshakes, endpoints: Sequence[str], started: float | None = None
    ) -> None:
        self._endpoints = list(endpoints)
        self._handshakes = handshakes
        #: when the wait began (`started`, default now): what its notice counts from too
        self.started = time.monotonic() if started is None else started

    def poll(self) -> None:
        """Read the events that came (never blocks)."""
        self._handshakes.read()

    def down(self) -> bool:
        """Whether a receiver is disconnected now (never blocks)."""
        self.poll()
        return any(since is not None for since in self._handshakes.down_since)

    def down_endpoints(self) -> tuple[str, ...]:
        """The endpoints of the receivers disconnected now, in receiver order (never
        blocks): those whose messages a close could not deliver."""
        self.poll()
        down = self._handshakes.down_since
        return tuple(e for e, since in zip(self._endpoints, down, strict=True) if since is not None)

    def down_at(self) -> tuple[tuple[str, ...], float] | None:
        """The endpoints of the receivers disconnected now and since when the first of
        them is (`time.monotonic()`), or None while every one is connected."""
        self.poll()
        down = [(e, s) for e, s in zip(self._endpoints, self._handshakes.down_since, strict=True)]
        since = [s for _, s in down if s is not None]
        return None if not since else (tuple(e for e, s in down if s is not None), min(since))

    def gone(self, after: float, bound: str | None = None, cause: str | None = None) -> str | None:
        """Why a receiver counts as gone (disconnected for more than `after` seconds,
        without a new connection: "to ENDPOINT: ..."), or None while every one may
        still be reading. `bound`: what set `after`, as the message says it (default:
        ``disconnected_timeout=AFTER s``, the setting a user changes). `cause`: why it
        went, if a stop record says ("the trainer was preempted (...)"); default "the
        trainer died, or its node"."""
        self.poll()
        now = time.monotonic()
        said = f"disconnected_timeout={after} s" if bound is None else bound
        down = self._handshakes.down_since
        for index, endpoint in enumerate(self._endpoints):
            since = down[index]
            if since is not None and now - max(since, self.started) > after:
                never = never_note(self._handshakes, self._endpoints)
                unreached = self._handshakes.never_connected(self._endpoints)
                if down[index] is None:  # (the notes read: it connected meanwhile; was
                    continue  # "disconnected for 0 s without a new connection" after a failure)
                if endpoint in unreached:
                    # (nothing died: no connection was ever made; the note says why)
                    tried = f"tried for {now - since:.0f} s ({said})"
                    return f"to {endpoint}: the receiver is unreachable, {tried}: {never}"
                # (counted from the wait's start: say both when it went down before)
                if since < self.started - 0.5:
                    said += f", counted from this wait's start {now - self.started:.0f} s ago"
                return (
                    f"to {endpoint}: the receiver is unreachable, disconnected for "
                    f"{now - since:.0f} s without a new connection ({said}; "
                    f"{gone_cause(self._handshakes, index, cause)}){'; ' if never else ''}{never}"
                )
        return None
