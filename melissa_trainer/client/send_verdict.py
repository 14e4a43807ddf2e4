"""What a send that gives up says, whether it waited or not (`SendVerdict`, the base of
`send_wait.SendWait`): a receiver that refused the handshake (`_refused`), a trainer
whose stop record says that it stopped for good while a receiver is disconnected
(`_stop_said`, the close's sentence), and, once `send_timeout` ended a send, what the
sockets' monitors know (`timeout`; the module docstring of `send_wait` says which words
and why).

Not thread-safe: used by the client's thread, holding its socket lock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from melissa_trainer.client.gave_up import DeliveryFailed, run_again, stop_sentence
from melissa_trainer.client.handshake import Handshakes
from melissa_trainer.client.handshake_notes import down_note, never_note, pending_note

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.gave_up import StopSaid

__all__ = ["FLUSHED", "SendVerdict", "no_record", "what_sent"]


class SendVerdict:
    """The words a send of one client gives up with (module docstring).

    Args:
        handshakes: the sockets' monitors (their one reader).
        endpoints: the receivers' endpoints.
        send_timeout: the client's, for messages (None: no bound).
        whose: who sends, for messages ("simulation 3 rank 0").
        restarted: what to add to the message of a receiver gone (`RestartCheck.note`:
            the trainer was restarted, run the simulation again); None: nothing.
        simulation_id: whose, for the fix its error states (`run_again`).
    """

    def __init__(
        self,
        handshakes: Handshakes,
        endpoints: Sequence[str],
        send_timeout: float | None,
        whose: str,
        restarted: Callable[[], str] | None = None,
        simulation_id: int = 0,
    ) -> None:
        self._endpoints, self._handshakes = endpoints, handshakes
        self._send_timeout, self._whose, self._simulation_id = send_timeout, whose, simulation_id
        #: `RestartCheck.note`, read once a receiver is found gone (close reads it too)
        self.restarted: Callable[[], str] = restarted or str
        #: why the trainer stopped for good, read by a close while a receiver is down
        #: and by a send that gives up with one down (`RestartCheck.stopped`, set by the
        #: client); None: not known
        self.stopped: Callable[[], StopSaid | None] | None = None
        #: "the trainer was preempted (...)" if a stop record says so, read by a close
        #: while a receiver is down and by a send that gives up on one gone, said in
        #: place of "died" (`RestartCheck.preempted`, set by the client)
        self.preempted: Callable[[], str | None] = no_record

    def timeout(self, step: int | None) -> TimeoutError | ValueError:
        """The error of a send (of `step`, or of a message) that `send_timeout` ended: a
        ValueError naming the key if a receiver refused the handshake (it never reads:
        not back-pressure), as the C client's MT_EENV; else a TimeoutError saying what
        is known: the trainer stopped for good, as its stop record says (`stopped`),
        first; else what the monitors know: no connection ever accepted, a peer not a
        receiver, or not one yet (check the endpoint), a receiver disconnected for N s
        (the trainer died or was restarted, or was preempted if its stop record says so:
        `preempted`; run the simulation again), or, all connected and past their
        handshakes, back-pressure."""
        refused = self._refused(step)
        if refused is not None:
            return refused
        stop = self._stop_said(step)
        if stop is not None:  # (no trainer comes back: what its stop record says, first)
            return DeliveryFailed(f"{stop[0]} (send_timeout={self._send_timeout} s ended the send)")
        ended = f"{self._whose}: could not send {what_sent(step)} within send_timeout="
        ended += f"{self._send_timeout} s: "
        # What the monitors know, in a close's words (`never_note`: the endpoint is
        # wrong; `pending_note`: no handshake yet, sooner than `never_note` can say it is
        # not a receiver; `down_note`: the trainer died or was restarted, what to do).
        # Back-pressure only while every receiver is connected: the one cause left.
        known = [
            never_note(self._handshakes, self._endpoints),
            pending_note(self._handshakes, self._endpoints),
        ]
        down = down_note(self._handshakes, self._endpoints)
        if down:  # (not followed, a send that send_timeout ended: `_tell`)
            # (its stop record, read once one is down: said in place of "died", as the
            # send that disconnected_timeout ends says it)
            if (cause := self.preempted()) is not None:
                down = down_note(self._handshakes, self._endpoints, cause) or down
            known.append(f"{down}. {self.restarted().strip() or run_again(self._simulation_id)}")
        said = "; ".join(k for k in known if k)
        return DeliveryFailed(ended + (said or "the trainer is not receiving (back-pressure)"))

    def _stop_said(self, step: int | None) -> tuple[str, StopSaid] | None:
        """What a send of `step` that gives up says when a receiver is disconnected now
        and a stop record says that its trainer stopped for good (`stopped`): the close's
        sentence (`gave_up.stop_sentence`), the record's reason first, and the record's
        parts; else None. A stat of the rendezvous files while a receiver is down."""
        if self.stopped is None:
            return None
        self._handshakes.read()
        since = zip(self._endpoints, self._handshakes.down_since, strict=False)
        down = [endpoint for endpoint, at in since if at is not None]
        said = self.stopped() if down else None
        if said is None:
            return None
        # (a flush sends nothing of its own: it may find its queue empty, or not)
        what = FLUSHED if step is None else f"time step {step} and those queued before it"
        return stop_sentence(self._whose, what, "were", said, down), said

    def _refused(self, step: int | None) -> ValueError | None:
        """The error of a send of `step` to a receiver that refused the handshake, if
        one did (events read without blocking), else None."""
        why = self._handshakes.refused(self._endpoints)
        if why is None:
            return None
        return ValueError(f"{self._whose}: could not send {what_sent(step)} {why}")


def no_record() -> str | None:
    """No stop record is read (`SendWait.preempted` of a client without a rendezvous)."""
    return None


#: what a flush that gives up on a stop record says was not delivered (C: stop_said.c)
FLUSHED = "any messages still queued at this flush"


def what_sent(step: int | None) -> str:
    return "a message" if step is None else f"time step {step}"
