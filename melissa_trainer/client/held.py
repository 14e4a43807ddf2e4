"""When a large array sent without a copy is the caller's again (`Client(array_reuse=...)`).

A payload of more than `INLINE_MAX_BYTES` leaves as a ZeroMQ frame that points into the
caller's array: ZeroMQ's I/O thread reads it after `send` has returned, until the message
is on the wire. `HeldArrays` keeps the tracker of each such frame and waits for them as
the client's `array_reuse` mode says:

- ``"immediate"``: `send` returns once ZeroMQ is done with its own arrays (and any left
  by an earlier send that timed out): the caller may overwrite them at once.
- ``"next_send"``: `send` first waits for the previous send's arrays and returns with its
  own still queued (a non-blocking MPI send completed by the next): the transfer of step
  t overlaps the computation of step t+1 (double buffering).
- ``"never"``: the caller hands each array over and never writes it again (a code that
  computes a new array every step). ZeroMQ keeps it alive until sent, `send` waits only
  to bound the memory held (`HELD_BYTES_MAX`, oldest first, never for its own arrays),
  and the client makes the array read-only so that a write by mistake raises instead of
  changing a message in flight (a write through another view is not caught).

Everything here runs in the client's thread (not thread-safe), except the `Released`
callback (pyzmq's garbage-collector thread). Waits are bounded by a deadline
(`time.monotonic()` seconds, `None` for none) and by `SLICE`, and raise `zmq.NotDone`
when either passes; the arrays waited for then stay held, and the next wait takes them
up again (the client's `send_wait` retries a wait whose slice ran out).

Trackers: `Released` rather than pyzmq's ``send(track=True)``. pyzmq keeps a reference
to the object sent without a copy until ZeroMQ frees the message, then drops it in its
garbage-collector thread; a weak reference to that object (a fresh memoryview of the
array) dies at that moment, and its callback releases a lock. That is the same event
``track=True`` reports, for a fraction of its cost per send (it makes a
`threading.Event` and a `MessageTracker` per frame, and an `Event.set` in the collector
thread; figures: docs/measured.md, "Design choices, measured").
"""

from __future__ import annotations

import time
import weakref
from _thread import allocate_lock
from typing import TYPE_CHECKING, Any, Protocol

import zmq

from melissa_trainer.client.sockets import SLICE

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = [
    "ARRAY_REUSE_MODES",
    "HELD_BYTES_MAX",
    "HeldArrays",
    "Released",
    "Tracker",
    "check_array_reuse",
]

#: The values of `Client(array_reuse=...)`.
ARRAY_REUSE_MODES = ("immediate", "next_send", "never")
#: With ``array_reuse="never"``, the most bytes of earlier sends' arrays that ZeroMQ may
#: hold before `send` waits for the oldest (one send's own arrays are never waited for).
HELD_BYTES_MAX = 64 << 20


def check_array_reuse(mode: object) -> str:
    """`mode` if it is one of `ARRAY_REUSE_MODES`, else a ValueError saying which are."""
    if mode not in ARRAY_REUSE_MODES:
        raise ValueError(
            f"array_reuse must be one of {list(ARRAY_REUSE_MODES)}, not {mode!r}: "
            f'"immediate" if the code overwrites a sent array at once (the safe default), '
            f'"next_send" if it leaves it one step (double buffering), "never" if it '
            f"computes a new array every step"
        )
    return str(mode)


class Tracker(Protocol):
    """What `HeldArrays` needs of a tracker (`Released`, or pyzmq's MessageTracker)."""

    @property
    def done(self) -> bool: ...

    def wait(self, timeout: float = -1) -> Any: ...


class Released(weakref.ref):
    """Done once pyzmq has dropped `sent`, the object handed to ``send(copy=False)``.

    Create it before the send, from an object nothing else keeps (`memoryview(array)`),
    and drop your own reference after the send: from then on only pyzmq holds it, until
    ZeroMQ is done with the frame. If the send fails, pyzmq drops it at once (done).
    `done` and `wait` are safe from any thread.
    """

    __slots__ = ("_lock",)

    def __new__(cls, sent: object) -> Released:
        return super().__new__(cls, sent, _release)

    def __init__(self, sent: object) -> None:  # (`__new__` made the weak reference)
        lock = allocate_lock()
        lock.acquire()
        self._lock = lock  # (set before `sent` can die: the caller holds it)

    @property
    def done(self) -> bool:
        """True once the object is gone (ZeroMQ has released the frame)."""
        return not self._lock.locked()

    def wait(self, timeout: float = -1) -> None:
        """Block until done, at most `timeout` seconds (-1: no bound).

        Raises:
            zmq.NotDone: not done within `timeout`.
        """
        lock = self._lock
        if not lock.acquire(timeout=-1 if timeout < 0 else timeout):
            raise zmq.NotDone
        lock.release()


def _release(ref: Released) -> None:
    ref._lock.release()  # called once, by whichever thread dropped the last reference


class HeldArrays:
    """The trackers of the large arrays ZeroMQ may still be reading, oldest first.

    `send` is the one way a client sends an array without a copy (its general and fast
    paths alike); `after_send` then waits as the mode says.
    """

    def __init__(self, mode: str) -> None:
        self.mode = check_array_reuse(mode)
        self._never = self.mode == "never"
        self._held: list[tuple[Tracker, int]] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._held)

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held (those found sent are dropped at each wait)."""
        return self._bytes

    def add(self, tracker: Tracker, nbytes: int) -> None:
        """Hold the array of one queued frame (then call `after_send` once per send)."""
        self._held.append((tracker, nbytes))
        self._bytes += nbytes

    def send(self, sock: zmq.Socket, header: bytes, array: np.ndarray) -> None:
        """Send `header` and the memory of `array` (C-contiguous) as one two-frame
        message, the array without a copy, and hold it (call `after_send` once the
        send's arrays are queued). With mode "never", the array becomes read-only.

        Blocks as the socket's SNDTIMEO says. Raises:
            zmq.Again: SNDTIMEO passed before the header was queued (nothing was sent).
        """
        sock.send(header, zmq.SNDMORE)
        # The high-water mark counts whole messages: once the first part is queued, the
        # second one is accepted at once (multi-part messages are atomic).
        view = array.data  # a new memoryview: pyzmq alone keeps it once this returns
        released = Released(view)
        sock.send(view, copy=False)
        nbytes = array.nbytes
        self._held.append((released, nbytes))
        self._bytes += nbytes
        if self._never:
            array.flags.writeable = False  # the client's now: see array_reuse

    def after_send(self, own: int, deadline: float | None) -> None:
        """Wait as the mode says at the end of a send that queued the last `own` arrays."""
        if self.mode == "immediate":
            self._wait(len(self._held), deadline)
        elif self.mode == "next_send":
            self._wait(len(self._held) - own, deadline)
        else:
            self._drop_sent()  # (an own array may be dropped too: then all earlier were)
            if self._bytes <= HELD_BYTES_MAX:
                return  # the usual case: under the bound with the own arrays counted
            earlier = max(len(self._held) - own, 0)
            over = self._bytes - sum(n for _, n in self._held[earlier:]) - HELD_BYTES_MAX
            waited = 0
            while over > 0 and waited < earlier:  # the oldest first
                over -= self._held[waited][1]
                waited += 1
            self._wait(waited, deadline)

    def release_all(self, deadline: float | None) -> None:
        """Wait until ZeroMQ is done with every array held (`flush`, `close`)."""
        self._wait(len(self._held), deadline)

    def _wait(self, count: int, deadline: float | None) -> None:
        """Wait for the `count` oldest arrays, then drop them and the sent ones after."""
        # In slices (`SLICE`, as a socket's SNDTIMEO): a wait that runs out of one
        # raises zmq.NotDone, and the client looks whether its receivers are still
        # there before it waits again (`send_wait`). A tracker already done (the usual
        # send) returns at once whatever the bound.
        try:
            for tracker, _ in self._held[:count]:
                if deadline is None:
                    tracker.wait(SLICE)
                else:
                    tracker.wait(min(max(deadline - time.monotonic(), 0.0), SLICE))
        except zmq.NotDone:
            self._drop_sent()  # (those that left go: a close counts them as progress)
            raise
        for _, nbytes in self._held[:count]:
            self._bytes -= nbytes
        del self._held[:count]
        self._drop_sent()

    def _drop_sent(self) -> None:
        # From the front only (messages leave in order, per socket): a send looks at
        # one or two trackers, not at all of them.
        held = self._held
        done = 0
        while done < len(held) and held[done][0].done:
            self._bytes -= held[done][1]
            done += 1
        del held[:done]
