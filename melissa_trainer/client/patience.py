"""How long a closing client waits: as long as the trainer is there, not a fixed minute.

What the client sees of the trainer's process, through its TCP connections:

* **alive and reading**: messages leave; `close` returns in milliseconds.
* **alive, not reading** (paused by SIGSTOP, a suspended job, a swapped node, a long
  checkpoint with the buffer full): the connection stays established, the kernel
  buffers and the high-water mark fill, and sends block. No ZeroMQ event comes:
  nothing distinguishes this from a slow trainer, and nothing should: it is
  back-pressure. (ZMTP heartbeats would not help: a stopped process answers none, its
  I/O threads are stopped too, and libzmq's heartbeats drop back-pressured connections;
  see `melissa_trainer.stream.liveness`.)
* **dead** (killed, crashed): its kernel closes the connection at once; ZeroMQ reports
  it (``EVENT_DISCONNECTED``) and retries the connection every 100 ms, each refused
  (``EVENT_CONNECT_RETRIED``, ``EVENT_CLOSED``).
* **node gone** (crash, partition): the connection stays established until the kernel
  gives up on it (its retransmission or zero-window probes unanswered, minutes), then
  as for a dead trainer, the new connections timing out instead of being refused.

So `CloseWait` waits in slices of `SLICE` seconds and, between two, reads the events of
each socket's monitor (through a `peer_watch.PeerWatch`; the monitor `handshake.Handshakes`
set up when the socket connected: ZeroMQ allows one per socket; read only by a close
that has to wait): it gives up when
a receiver refused the handshake (at once: it never reads), when one has been
disconnected, without a new connection, for `ClientTuning.disconnected_timeout`
seconds, or when its deadline has passed (`ClientTuning.close_timeout` after the
start: `CloseWait` itself is a bound in all; the close's phases move it whenever they
see progress, `delivery.DeliveryWait` and `receipts`); otherwise it waits.
Once a receiver has been disconnected for `notice_after` seconds, it calls its `notice`
once (the close logs what it waits for and how long: a wait of minutes is not silent).

Not thread-safe: used by the closing thread, holding the client's socket lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import zmq

from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.handshake_notes import down_note, never_note, pending_note
from melissa_trainer.client.handshake_words import NOT_RECEIVER
from melissa_trainer.client.peer_watch import Notice, PeerWatch, notice_due
from melissa_trainer.client.sockets import SLICE, deadline_after, ms_left

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.gave_up import StopSaid

__all__ = ["CloseWait"]  # fmt: skip

#: how to change each bound a closing client names when it gives up (`CloseWait.timed_out`)
_HOW = {
    "close_timeout": (
        "ClientTuning(close_timeout=...) sets it; None waits as long as the receivers are connected"
    ),
    "failed_close_timeout": (
        "the bound of a close after a failure, close(bye=False) or an exception in the "
        "client's with block, not close_timeout: ClientTuning(failed_close_timeout=...) sets "
        "it; None leaves only close_timeout"
    ),
}
#: what bounds the wait for a disconnected receiver in a close after a failure
_NO_WAIT = "a close after a failure does not wait for a disconnected receiver"


class CloseWait:
    """The waits of one `Client.close` (see the module docstring).

    Args:
        sockets, endpoints: the client's sockets and their receivers' endpoints.
        close_timeout: seconds in all (None: no bound while the receivers are there).
        disconnected_timeout: seconds a receiver may stay disconnected (None: no bound).
        setting: the `ClientTuning` field whose value `close_timeout` is (``close_timeout``,
            or ``failed_close_timeout`` for a close after a failure): a message that
            gives up names it and how to change it, so that a user changes the right one.
        after_failure: a close after a failure (its messages say that it does not wait
            for a disconnected receiver, rather than name a `disconnected_timeout` of 0).
        handshakes: the sockets' monitors: a receiver that refused the handshake never
            reads, so a wait ends at once (`refusal` says why); `PeerWatch` reads them.
            None: neither (a socket without a monitor).
        watch: the watch of a blocked send that gave up (`send_wait`), if any: a
            receiver it found gone is not waited for again.
        stopped: while a receiver is disconnected, why its trainer is not coming back
            and the error the close raises (`RestartCheck.stopped`: its stop record), or
            None: the wait then ends at once (`stop_said`).
        notice: called once, when a receiver has been disconnected `notice_after`
            seconds (with what `Notice` says), before the wait gives up on it; None:
            nothing is said (a close after a failure, which does not wait on it).
        preempted: while a receiver is disconnected, "the trainer was preempted (...)"
            if its stop record says so (`RestartCheck.preempted`), else None: what the
            wait says of the receiver gone (`preempted_said`) instead of "died".
        seen: while a receiver is disconnected, why a restarted trainer is followed at
            once (`Following.seen`), or None: the wait then gives up on it at once.
    """

    def __init__(
        self,
        sockets: Sequence[zmq.Socket],
        endpoints: Sequence[str],
        close_timeout: float | None,
        disconnected_timeout: float | None,
        *,
        setting: str = "close_timeout",
        after_failure: bool = False,
        handshakes: Handshakes | None = None,
        watch: PeerWatch | None = None,
        stopped: Callable[[], StopSaid | None] | None = None,
        notice: Notice | None = None,
        preempted: Callable[[], str | None] | None = None,
        seen: Callable[[], str | None] | None = None,
    ) -> None:
        self._sockets, self._endpoints = sockets, endpoints
        self.close_timeout, self._disconnected = close_timeout, disconnected_timeout
        self.deadline = deadline_after(close_timeout)
        self._setting, self._after_failure = setting, after_failure
        self._watch, self._handshakes = watch, handshakes
        self.refusal: str | None = None  # why a wait ended on a refused handshake
        self._stopped, self._seen = stopped, seen
        #: why a wait ended on a trainer that stopped for good, and the error to raise
        #: (`SimulationRefused` when the simulation's non-finite sample stopped it)
        self.stop_said: StopSaid | None = None
        #: the receivers disconnected when `stop_said` was read: those whose messages
        #: were not delivered (the record may be another receiver's)
        self.stop_down: tuple[str, ...] = ()
        self._notice = notice
        self._preempted = preempted
        #: why a wait gave up on a receiver gone, if a stop record says its trainer was
        #: preempted ("the trainer was preempted (...)"; `preempted`): a resume may follow
        self.preempted_said: str | None = None
        self._began = time.monotonic()  # (as the notice's start: `closing`)

    def timed_out(self) -> str:
        """Why the client gave up when `close_timeout` ran out, to follow "not delivered":
        "within SETTING=... s to [...] (how to change it)", and what the monitors know
        (a send's words, `send_wait.SendWait.timeout`): `never_note`, `pending_note` (a
        peer without a handshake yet), `down_note` (a receiver disconnected for N s:
        the trainer died or was restarted; or was preempted, as its stop record says)."""
        known = [never_note(self._handshakes, self._endpoints)]
        if self._handshakes is not None:
            known.append(pending_note(self._handshakes, self._endpoints))
            down = down_note(self._handshakes, self._endpoints)
            # (a stop record that says preempted, read once one is down: said in place
            # of "died", as a send's timeout says it; the error stays a TimeoutError)
            if down and self._preempted is not None and (cause := self._preempted()):
                down = down_note(self._handshakes, self._endpoints, cause) or down
            known.append(down)
        said = "; ".join(k for k in known if k)
        return (
            f"within {self._setting}={self.close_timeout} s to {list(self._endpoints)} "
            f"({_HOW[self._setting]}){': ' if said else ''}{said}"
        )

    def until_done(
        self, attempt: Callable[[float], None], *timed_out: type[BaseException]
    ) -> str | None:
        """Call ``attempt(deadline)`` until it returns: an attempt that raises one of
        `timed_out` (it blocked past `deadline`, at most `SLICE` s away, and can be
        called again) is retried while the receivers are there and time is left.

        Returns:
            None once an attempt returned; else why the client gave up, to follow
            "not delivered" ("within close_timeout=... s to [...]", "to ENDPOINT: ...";
            "to ENDPOINT" when a stop record said why, `stop_said`, which the close's
            message is composed from instead).
        """
        while True:
            now = time.monotonic()
            end = now + SLICE if self.deadline is None else min(now + SLICE, self.deadline)
            try:
                attempt(end)
                return None
            except timed_out:
                pass
            handshakes = self._handshakes
            if handshakes is not None and (why := handshakes.refused(self._endpoints)):
                self.refusal = why
                return why
            if (other := self._no_receiver()) is not None:  # (after a failure only)
                return other
            if handshakes is not None and self._watch is None:
                self._watch = PeerWatch(handshakes, self._endpoints, self._began)
            # (before the deadline: a close_timeout ending as a receiver went down says
            # why its trainer stopped for good, not only that it ran out)
            if self._watch is not None and self._stopped is not None and self._watch.down():
                self.stop_said = self._stopped()  # (a stat of its files while one is down)
                if self.stop_said is not None:  # (the close composes its message from it)
                    self.stop_down = self._watch.down_endpoints()
                    return f"to {', '.join(self.stop_down) or self.stop_said.endpoint}"
            watch, seen = self._watch, self._seen  # (the caller follows it: `following`)
            if seen is not None and watch is not None and watch.down() and (said := seen()):
                return f"to {', '.join(watch.down_endpoints())}: {said}"
            if self.deadline is not None and time.monotonic() >= self.deadline:
                return self.timed_out()
            if self._notice is not None and self._watch is not None:
                self._tell(self._watch)  # (before `gone`: said before it gives up)
            if self._disconnected is not None and self._watch is not None:
                bound = _NO_WAIT if self._after_failure else None
                # (a stat of each rendezvous file: only while a receiver is down, which
                # alone a record can explain; not each slice of a wait on a slow trainer)
                preempted = self._preempted if self._watch.down() else None
                cause = None if preempted is None else preempted()
                why = self._watch.gone(self._disconnected, bound, cause)
                if why is not None:
                    self.preempted_said = cause
                    return why

    def not_connected(self) -> str | None:
        """After a failure (`after_failure`), why a receiver disconnected now is not
        waited for ("to ENDPOINT: ...", as `until_done` says of it), else None, once the
        first connect of each socket has an outcome (`Handshakes.await_outcomes`, by the
        deadline): the close of `closing` then waits for no handshake and lingers on
        nothing, as its `until_done` waits for nothing of a receiver disconnected."""
        if (other := self._no_receiver()) is not None:
            return other
        if not self._after_failure or self._handshakes is None or self._disconnected is None:
            return None
        self._handshakes.await_outcomes(self._endpoints, self.deadline)  # (a refusal unread)
        if (refused := self._handshakes.refused(self._endpoints)) is not None:
            self.refusal = refused  # (a peer ending each connection: not "the trainer died")
            return refused
        if self._watch is None:
            self._watch = PeerWatch(self._handshakes, self._endpoints, self._began)
        cause = None if self._preempted is None else self._preempted()  # (not "died")
        return self._watch.gone(self._disconnected, _NO_WAIT, cause)

    def _no_receiver(self) -> str | None:
        """Why a peer that is not a receiver is not waited for ("to E: `NOT_RECEIVER`;
        ..."), else None (never blocks): after a failure only. It accepted TCP, so it
        looks connected, but no handshake completed in `NOT_ZMQ_AFTER` s (a receiver's
        takes milliseconds). Safe as for a receiver disconnected (`closing`): no BYE is
        sent; the simulation is run again and sends every step again. A close with a
        BYE waits for it (until `close_timeout`): silence alone is what a receiver
        whose trainer is stopped (SIGSTOP, a suspended job) shows too, and it delivers
        everything once continued (tests/launcher/test_pause.py); a peer that ends every
        handshake (an HTTP server) is refused at once (`Handshakes.refused`)."""
        if not self._after_failure or self._handshakes is None:
            return None
        other = ", ".join(self._handshakes.not_receivers(self._endpoints))
        said = f"to {other}: {NOT_RECEIVER}; a close after a failure does not wait for it"
        return said if other else None

    def bound_said(self) -> str:
        """What a notice names as the bound of `deadline`: "ClientTuning.SETTING=T s"
        (`delivery.DeliveryWait`: the close's cap in all once that holds it back)."""
        return f"ClientTuning.{self._setting}={self.close_timeout} s"

    def _tell(self, watch: PeerWatch) -> None:
        """Call the notice, once, if a receiver has been down `notice_after` seconds."""
        said = notice_due(watch, self._disconnected, self.deadline, self.bound_said())
        if said is not None and self._notice is not None:
            notice, self._notice = self._notice, None  # (once)
            notice(*said)

    def down_endpoints(self) -> tuple[str, ...]:
        """The endpoints of the receivers disconnected now, as far as the wait watched
        them (none without a watch): those whose messages a failed close did not
        deliver."""
        return () if self._watch is None else self._watch.down_endpoints()

    def left_ms(self) -> int:
        """Milliseconds left of `close_timeout` (-1: no bound), for ZeroMQ's linger."""
        if self.deadline is None:
            return -1
        return ms_left(self.deadline)  # (capped: ZeroMQ's linger is a C int)

    def close(self) -> None:
        """Forget the watch (the monitors are `Handshakes`'s, closed with the sockets)."""
        self._watch = None
