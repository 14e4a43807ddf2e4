"""How long a blocked `send` waits: as long as the trainer is there, not for a dead one.

A send blocks when ZeroMQ's queue to a receiver is full (the high-water mark) or, for a
large array, until ZeroMQ is done with it (`held`). Back-pressure is a feature: a
trainer that is slow, busy or paused (SIGSTOP, a suspended job) keeps its connections
open, and the simulation waits for it as long as it lasts (or `send_timeout`). But to
the queue a trainer that is *gone* looks the same: without more, a send blocked
forever once the trainer was killed (seen after 2,816 steps of a simulation whose
trainer got a SIGKILL). What tells the two apart is what `patience` reads for `close`:
a dead trainer's connections are closed and every reconnection refused.

So every blocking call of a send is bounded by `SLICE` (SNDTIMEO, or a tracker's
wait): on the usual send, queue not full, that bound is never reached and costs
nothing (no extra call: SNDTIMEO is set once, when the socket is made). Only a call
that ran out of its slice comes here (`SendWait.retry`), which retries it in slices,
and between two reads the sockets' monitors (`handshake.Handshakes`, set up when they
connected: ZeroMQ allows one monitor per socket, which the close reads too):

* a receiver that refused the handshake (a CURVE key it does not hold) never reads:
  the send raises the `ValueError` naming its endpoint and the key to check, as a close
  does, rather than block for ever (or until `send_timeout`, blaming back-pressure);
* once a receiver has been disconnected, without a new connection, for
  `ClientTuning.disconnected_timeout` seconds (`patience.PeerWatch`), the send raises
  `ReceiverGone` (a `TimeoutError`, the type `send` documents) naming the endpoint, how
  long it blocked, and the settings that bound the wait; and, when the rendezvous now
  names another run (the trainer was restarted), what to do (`restart.RestartCheck`).

Not thread-safe: used by the client's thread, holding its socket lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import zmq

from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.patience import SLICE, PeerWatch
from melissa_trainer.client.sockets import arm_slice

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.closing import StopSaid

__all__ = ["ReceiverGone", "SendWait"]

_T = TypeVar("_T")


class ReceiverGone(TimeoutError):
    """A blocked send gave up: a receiver stayed disconnected for `disconnected_timeout`
    seconds (the trainer died, or its node). A `TimeoutError`, as `send` documents."""


class SendWait:
    """The waits of the sends of one client that ran out of a slice (module docstring).

    Args:
        sockets, endpoints: the client's sockets and their receivers' endpoints.
        handshakes: the sockets' monitors (their one reader).
        disconnected_timeout: seconds a receiver may stay disconnected while a send is
            blocked (None: a blocked send waits whatever happens, bounded by
            `send_timeout` only).
        send_timeout: the client's, for messages (None: no bound).
        whose: who sends, for messages ("simulation 3 rank 0").
        restarted: what to add to the message of a receiver gone (`RestartCheck.note`:
            the trainer was restarted, run the simulation again); None: nothing.
    """

    def __init__(
        self,
        sockets: Sequence[zmq.Socket],
        endpoints: Sequence[str],
        handshakes: Handshakes,
        disconnected_timeout: float | None,
        send_timeout: float | None,
        whose: str,
        restarted: Callable[[], str] | None = None,
    ) -> None:
        self._sockets, self._endpoints, self._handshakes = sockets, endpoints, handshakes
        #: `RestartCheck.note`, read once a receiver is found gone (close reads it too)
        self.restarted: Callable[[], str] = restarted or str
        #: why the trainer stopped for good, read by a close while a receiver is down
        #: (`RestartCheck.stopped`, set by the client); None: not known
        self.stopped: Callable[[], StopSaid | None] | None = None
        self._disconnected, self._send_timeout = disconnected_timeout, send_timeout
        self._whose = whose
        #: the watch of the receivers, begun when a send has blocked a slice, ended
        #: when it is through; left by a send that gave up (`close` goes on with it:
        #: the receiver found gone is not waited for again)
        self.watch: PeerWatch | None = None

    def retry(
        self,
        attempt: Callable[[], _T],
        first: BaseException,
        step: int | None,
        index: int | None = None,
        deadline: float | None = None,
    ) -> _T:
        """Call `attempt` again until it returns, after its first call raised `first`
        (a slice ran out: ``zmq.Again``, ``zmq.NotDone``, the outbox's `TimeoutError`;
        the attempt did nothing and can be repeated). Blocks in slices of at most
        `SLICE` seconds: socket `index`'s SNDTIMEO is set to one before each call (None:
        a wait for arrays, whose tracker takes its own).

        Args:
            step: the time step sent, for messages (None: "a message").
            deadline: the send's, from `send_timeout` (None: no bound).

        Returns:
            what the attempt returned.

        Raises:
            ValueError: a receiver refused the handshake (`Handshakes.refused`).
            ReceiverGone: a receiver has been disconnected for `disconnected_timeout`.
            TimeoutError: `deadline` passed (`timeout`).
        """
        started = time.monotonic() - SLICE  # (the first slice ran out just now)
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                self.close()  # (as below: the next wait starts afresh)
                raise self.timeout(step) from None
            self._check(started, step)
            if index is not None:
                arm_slice(self._sockets[index], deadline)
            try:
                done = attempt()
            except type(first):
                continue
            # The watch goes with the wait that needed it: the next wait gives a
            # receiver down then its `disconnected_timeout` afresh.
            self.close()
            return done

    def timeout(self, step: int | None) -> TimeoutError | ValueError:
        """The error of a send (of `step`, or of a message) that `send_timeout` ended: a
        ValueError naming the key if a receiver refused the handshake (it never reads:
        not back-pressure), as the C client's MT_EENV."""
        refused = self._refused(step)
        if refused is not None:
            return refused
        return TimeoutError(
            f"{self._whose}: could not send {_what(step)} within send_timeout="
            f"{self._send_timeout} s: the trainer is not receiving (back-pressure)"
        )

    def _check(self, started: float, step: int | None) -> None:
        """Raise the ValueError of a refused handshake, or `ReceiverGone` if a receiver
        is gone (module docstring), else return."""
        refused = self._refused(step)
        if refused is not None:
            raise refused
        if self._disconnected is None:
            return
        if self.watch is None:
            self.watch = PeerWatch(self._handshakes, self._endpoints)
        why = self.watch.gone(self._disconnected)
        if why is None:
            return
        bound = "none" if self._send_timeout is None else f"{self._send_timeout} s"
        blocked = time.monotonic() - started
        raise ReceiverGone(
            f"{self._whose}: could not send {_what(step)}, blocked {blocked:.1f} s waiting "
            f"for the trainer to take the messages queued {why}. A send waits for a trainer "
            f"that is connected, slow or paused, as long as it lasts or "
            f"Client(send_timeout=...) allows (now {bound}), and gives up on one "
            f"disconnected for ClientTuning(disconnected_timeout=...) seconds (None: never)."
            f"{self.restarted()}"
        )

    def _refused(self, step: int | None) -> ValueError | None:
        """The error of a send of `step` to a receiver that refused the handshake, if
        one did (events read without blocking), else None."""
        why = self._handshakes.refused(self._endpoints)
        if why is None:
            return None
        return ValueError(f"{self._whose}: could not send {_what(step)} {why}")

    def close(self) -> None:
        """End the watch, if any (the monitors are `Handshakes`'s)."""
        self.watch = None


def _what(step: int | None) -> str:
    return "a message" if step is None else f"time step {step}"
