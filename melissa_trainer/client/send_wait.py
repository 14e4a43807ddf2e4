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
  `ClientTuning.disconnected_timeout` seconds (`peer_watch.PeerWatch`), the send raises
  `ReceiverGone` (a `TimeoutError`, the type `send` documents) naming the endpoint, how
  long it blocked, and the settings that bound the wait; and, when the rendezvous now
  names another run (the trainer was restarted), what to do (`restart.RestartCheck`);
  else, unless the client follows a restarted trainer (`following`, which says it
  then, with the whole wait), to run the simulation again (`gave_up.run_again`).

A send that gave up says what the client knows, in a close's words. When a receiver is
disconnected and its trainer's stop record says that the run ended or failed
(`RestartCheck.stopped`), that first, in the close's sentence (`gave_up.stop_sentence`): no
trainer comes back there. A blocked send reads that record as a close does, once a slice
(`SLICE`) while a receiver is disconnected, and gives up as soon as it says so
(`StoppedForGood`, a `ReceiverGone`), rather than wait out `disconnected_timeout` or
`send_timeout`; a client that follows restarted trainers does not wait for one then
(`following`), and gives up (`ReceiverGone`) as soon as the rendezvous names a restarted
trainer (`Following.seen`, read at that pace), to follow it. Else a send that `send_timeout`
ended (`SendWait.timeout`) says what the monitors know (`handshake_notes.never_note`,
`pending_note`, `down_note`): no connection ever accepted or a peer that is not a receiver
(check the endpoint), a peer connected at the TCP level whose handshake has not come yet (a
`send_timeout` shorter than `handshake.NOT_ZMQ_AFTER`: if it persists, not a receiver), a
receiver disconnected for N s (the trainer died or was restarted, or was preempted when its
stop record says so, as the send `disconnected_timeout` ends says: what to do), and
back-pressure only while every receiver is connected past its handshake (a user trial read
"back-pressure" in all these cases).

A send whose queue is not full never comes here, and a solver started by hand computed
on into its queue after its trainer ended (a user trial: 2,400 steps, 27 s): so the sends
that do not block read the same record by the same rule (`SendWait.look`, at most every
`LOOK_EVERY` s, `_stop_said` while a receiver is disconnected) and fail the same way.

Once a receiver has been disconnected a few seconds (`peer_watch.notice_after`), a
blocked send logs one warning, as a close does (`closing.waiting_notice`, through
`notice`): what it waits for, how long in all, the settings that shorten it.

The errors a send gives up with are defined in `send_errors` (importable from here);
the words of a refused handshake, of a stop record and of a send that `send_timeout`
ended are its base's, `send_verdict.SendVerdict`.

Not thread-safe: used by the client's thread, holding its socket lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import zmq

from melissa_trainer.client.gave_up import run_again
from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.peer_watch import PeerWatch, notice_due
from melissa_trainer.client.send_errors import ReceiverGone, SendPreempted, StoppedForGood
from melissa_trainer.client.send_verdict import SendVerdict, no_record, what_sent
from melissa_trainer.client.sockets import SLICE, arm_slice

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.gave_up import StopSaid

__all__ = ["LOOK_EVERY", "SendNotice", "SendWait"]

_T = TypeVar("_T")
#: seconds between two looks at the monitors by sends that do not block (`SendWait.look`):
#: a peer that is not a receiver is said within `handshake.NOT_ZMQ_AFTER` + this
LOOK_EVERY = 0.5

#: ``notice(follow_in, started, down, since, left, bound, doing)``: what a blocked send
#: calls once (`closing.waiting_notice` bound to the transport): `peer_watch.Notice`'s
#: arguments after the rendezvous it follows in (None: none), the `time.monotonic()`
#: its wait began, and before "sending time step 7" (what it does)
SendNotice = Callable[[str | None, float, tuple[str, ...], float, float | None, str, str], None]


class SendWait(SendVerdict):
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
        notice: what a send blocked on a receiver disconnected `notice_after` seconds
            calls once (`SendNotice`); None: nothing is said.
        simulation_id: whose, for the fix its error states (`run_again`).
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
        notice: SendNotice | None = None,
        simulation_id: int = 0,
    ) -> None:
        super().__init__(handshakes, endpoints, send_timeout, whose, restarted, simulation_id)
        self._sockets = sockets
        #: whether the stop records say that the run ended having taken every step sent
        #: (the steps sent to each receiver, their least and greatest), read by a close
        #: whose BYE was not delivered (`RestartCheck.all_taken`, set by the client): it
        #: then asks the receipts
        self.all_taken: Callable[[list[int], list[tuple[int, int] | None]], bool] = _none_taken
        self._disconnected, self._notice = disconnected_timeout, notice
        #: the rendezvous whose restarted trainer the client waits for and follows once
        #: a send gave up (`following`, set by the client: `follows`), or None
        self.follow_in: str | None = None
        self.seen: Callable[[], str | None] | None = None  # (`Following.seen`: `follows`)
        self._told = False  # (the notice said, in this watch's wait)
        #: when a blocked send may next read the stop record (`time.monotonic()`): once
        #: a slice at most, as a close does (`patience.CloseWait.until_done`)
        self._stop_look = 0.0
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
            StoppedForGood: a receiver is disconnected and its trainer's stop record
                says that it stopped for good (read once a slice at most).
            ReceiverGone: a receiver has been disconnected for `disconnected_timeout`.
            TimeoutError: `deadline` passed (`timeout`).
        """
        started = time.monotonic() - SLICE  # (the first slice ran out just now)
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                self.close()  # (as below: the next wait starts afresh)
                raise self.timeout(step) from None
            self._check(started, step, deadline)
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

    def follows(
        self,
        stopped: Callable[[], StopSaid | None],
        follow_in: str | None,
        preempted: Callable[[], str | None] | None = None,
        seen: Callable[[], str | None] | None = None,
    ) -> None:
        """Set `stopped` (`RestartCheck.stopped`), `follow_in` (None: the client
        follows no restarted trainer), `preempted` (`RestartCheck.preempted`) and `seen`."""
        self.stopped, self.follow_in, self.seen = stopped, follow_in, seen
        self.preempted = preempted or no_record

    def _check(self, started: float, step: int | None, deadline: float | None) -> None:
        """Raise the ValueError of a refused handshake, `StoppedForGood` if a receiver
        is disconnected and a stop record says its trainer stopped for good (whatever
        `disconnected_timeout`), or `ReceiverGone` if a receiver is gone (module
        docstring), else return, once saying so (`_tell`) if a receiver has been
        disconnected a while."""
        refused = self._refused(step)
        if refused is not None:
            raise refused
        now = time.monotonic()
        if self.stopped is not None and now >= self._stop_look:
            self._stop_look = now + SLICE  # (a close's cadence: once a slice at most)
            stop = self._stop_said(step)
            if stop is not None:  # (no trainer comes back: nothing to wait for, or follow)
                after = f"the send gave up after {now - started:.1f} s blocked"
                raise StoppedForGood.of(stop[1])(
                    f"{stop[0]} ({after}: no trainer comes back there)", stop[1]
                )
            down = any(at is not None for at in self._handshakes.down_since)  # (just read)
            if self.seen is not None and down and (seen := self.seen()) is not None:
                raise ReceiverGone(f"{self._whose}: sending {what_sent(step)}: {seen}")
        if self._disconnected is None and self._notice is None:
            return
        if self.watch is None:
            self.watch = PeerWatch(self._handshakes, self._endpoints, started)
        if not self._told:  # (before `gone`: said before it gives up)
            self._tell(self.watch, started, step, deadline)
        if self._disconnected is None:
            return
        why = self.watch.gone(self._disconnected)
        if why is None:
            return
        # (its stop record, read once one is gone: said in place of "died", as a close does)
        cause = self.preempted()
        if cause is not None:
            why = self.watch.gone(self._disconnected, cause=cause) or why
        bound = "none" if self._send_timeout is None else f"{self._send_timeout} s"
        blocked = time.monotonic() - started
        stop = self._stop_said(step)
        if stop is not None:  # (no trainer comes back: what its stop record says, first)
            gave_up = f"disconnected_timeout={self._disconnected} s"
            raise StoppedForGood.of(stop[1])(
                f"{stop[0]} (the send gave up after {blocked:.1f} s, {gave_up})", stop[1]
            )
        note = self.restarted()  # (a follower says what to do once it waited: `following`)
        fix = "" if note or self.follow_in is not None else f" {run_again(self._simulation_id)}"
        raise (SendPreempted if cause else ReceiverGone)(
            f"{self._whose}: could not send {what_sent(step)}, blocked {blocked:.1f} s waiting "
            f"for the trainer to take the messages queued {why}. A send waits for a trainer "
            f"that is connected, slow or paused, as long as it lasts or "
            f"Client(send_timeout=...) allows (now {bound}), and gives up on one "
            f"disconnected for ClientTuning(disconnected_timeout=...) seconds (None: never)."
            f"{note}{fix}"
        )

    def _tell(
        self, watch: PeerWatch, started: float, step: int | None, deadline: float | None
    ) -> None:
        """Call the notice, once a receiver has been down `notice_after` seconds (the
        words of a close's: `closing.waiting_notice`); once per watch."""
        bound = f"Client.send_timeout={self._send_timeout} s"
        said = notice_due(watch, self._disconnected, deadline, bound)
        if said is None or self._notice is None:
            return
        self._told = True
        # (a send that send_timeout ends raises a TimeoutError, not followed: `following`)
        follow_in = None if said[3] == bound else self.follow_in
        self._notice(follow_in, started, *said, f"sending {what_sent(step)}")

    def look(self, now: float, step: int | None = None) -> float:
        """A send (of `step`) that does not block looks at the monitors at most every
        `LOOK_EVERY` seconds (its clock read anyway: `fast_send.SendClock`; never
        blocks), so that a peer that is not a receiver (an HTTP server at the endpoint:
        TCP accepted, no ZeroMQ handshake) is warned of while the sends go through, not
        only once one blocks (which a client sending into its queue may never do). And,
        as a blocked send does (`_check`, the same `_stop_said`), while a receiver is
        disconnected, its trainer's stop record (a stat, read again only once it
        changed): a trainer that stopped for good ("end", "error", "nonfinite"; not
        "preempted" nor "stopped", which a resumed trainer follows) fails this send, not
        only the one that finds the queue full (a user trial's solver computed 2,400
        steps into ZeroMQ's queue after its trainer ended). Returns when to look next.

        Raises:
            StoppedForGood: as `retry`'s, "the send gave up before it blocked" said.
        """
        self._handshakes.warn(self._endpoints)
        if self.stopped is not None:
            stop = self._stop_said(step)
            if stop is not None:  # (no trainer comes back: this send and the next fail)
                after = "the send gave up before it blocked: no trainer comes back there"
                raise StoppedForGood.of(stop[1])(f"{stop[0]} ({after})", stop[1])
        return now + LOOK_EVERY

    def close(self) -> None:
        """End the watch, if any (the monitors are `Handshakes`'s)."""
        self.watch, self._told = None, False


def _none_taken(counts: list[int], spans: list[tuple[int, int] | None]) -> bool:
    """No stop record is read (`SendWait.all_taken` of a client without a rendezvous)."""
    return False
