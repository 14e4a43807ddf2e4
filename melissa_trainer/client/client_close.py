"""`ClosingClient`: the end of a `Client` (`close`, and the context manager that calls
it): the BYE said to every receiver, what is queued delivered, the sockets released,
and, with endpoints from a rendezvous outside a launched process, the wait for every
receiver to confirm it ingested the BYE (`confirm`). A mixin over `FollowsTrainer`, as
that one is over `Sending`: `Client` (`client`) owns construction and sets every
attribute used here; moved out of `client` (the module size bound).

Contract (`close`'s docstring has the whole of it): idempotent; `close(bye=False)` (and
leaving a ``with`` block by an exception) sends no BYE and waits briefly; leaving a
``with`` block by an exception raises nothing of the close's own, which would hide it.
Not thread-safe: the client's thread. Imports the standard library and this package's
client modules only (`confirm` at the close, not at start-up).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Self

from melissa_trainer.client.client_follow import FollowsTrainer
from melissa_trainer.client.closing import client_logger
from melissa_trainer.client.config import launched
from melissa_trainer.client.tuning import ClientTuning

__all__ = ["ClosingClient"]


class ClosingClient(FollowsTrainer):
    """`Client`'s end (module docstring)."""

    tuning: ClientTuning
    #: malformed ADMISSION replies ignored at `close`, by reason (`admission`)
    admission_rejected: Counter[str]

    def close(self, *, bye: bool = True) -> None:
        """Say BYE to every receiver, deliver what is queued, release the sockets.

        Waits while the trainer is there, reading or not (a paused or busy trainer is
        back-pressure, not a failure), giving up after `close_timeout` seconds *without
        progress* (the deadline moves whenever the receivers take a message or hold more
        of this simulation's steps: `melissa_trainer.client.delivery`,
        `melissa_trainer.client.receipts`; so not a bound in all: a trainer that keeps
        taking messages keeps the close waiting), and sooner on a receiver disconnected
        for `disconnected_timeout` seconds (see `melissa_trainer.client.patience`). With a
        replay window, a trainer found gone (or restarted) is followed first
        (`melissa_trainer.client.follow`). Idempotent. A peer that accepts TCP and never
        completes a handshake (another program at the endpoint; a trainer stopped by
        SIGSTOP is as silent) is warned of after `handshake.NOT_ZMQ_AFTER` (2 s) and
        at 15 s and each doubling; with a BYE it is waited for until `close_timeout` (a
        TimeoutError), after a failure no longer once it is said not a receiver
        (tests/client/: test_silent_peer_repeats, test_close_bye_not_a_receiver,
        test_close_not_a_receiver).

        With endpoints from a rendezvous, in external mode and in a worker (not in a
        process the launcher started) it returns only once every receiver confirms it
        ingested this rank's BYE, in external mode following a trainer restarted
        meanwhile: what that guarantees, and what not, is `melissa_trainer.client.confirm`'s.

        After a failure (``bye=False``) the wait is short: at most
        `ClientTuning.failed_close_timeout` seconds (default `FAILED_CLOSE_TIMEOUT`, 10;
        `close_timeout` if lower), and none for a receiver that is not connected (a
        solver started by hand without a trainer ends with its own error at once, not
        after a timeout); what gives up is logged, naming that setting.
        Nothing is lost: the launcher restarts the simulation, which sends its steps
        again, and the receivers keep one copy of each.

        Args:
            bye: send BYE (the simulation finished); `False` after a failure, so that the
                trainer does not take the simulation for complete.

        Raises:
            TimeoutError: the BYE or queued messages could not be delivered (they are
                dropped; the sockets and context are released all the same): the message
                says why: the setting that bounded the wait (`close_timeout`, or
                `failed_close_timeout` after a failure) and how to change it, or which
                receiver is unreachable. In external and worker mode, also a BYE the
                trainer did not confirm (gone, or restarted without it and not followed): the
                message says to run the simulation again with the same id.
            SimulationRefused: (a `ValueError`) with endpoints from a rendezvous, a
                receiver refused the simulation's HELLO (another grid than the study's,
                its parameters missing, another run's id), or every sample of it as
                non-finite: the message gives the reason and the fix
                (`melissa_trainer.client.confirm`). Nothing of it was trained on.
            ValueError: a receiver refused the handshake (a CURVE key it does not hold,
                a key for a receiver without CURVE, none for one with it: nothing sent
                to it was delivered); the message names its endpoint and the fix. Said
                as soon as ZeroMQ reports it, not when the close's timeout ends.
        """
        if self._closed:
            return
        self._closed = True
        began = time.monotonic()  # (the close's cap counts from here: `confirm_close`)
        self._watch.stop()
        self._asking.close()
        if self._following is None or not bye:
            self._transport.close(bye)
        else:
            self._following.close(
                lambda: self._transport.close(True, self._rendezvous), self._follow
            )
        if self._following is not None and self._following.followed_at is not None:
            # (a restarted trainer followed during the delivery: its close, delivery and
            # receipts, gets a budget of its own, as C's close_began; `confirm_close`)
            began = max(began, self._following.followed_at)
        if bye and self._rendezvous is not None and not launched():
            # PUSH acknowledges nothing: return once the trainer confirms that it has the
            # BYE (and took the simulation), following it if it restarts meanwhile
            # (external mode and worker mode: a worker lives on after this and reports
            # the simulation finished, its BYE maybe still in the shared context's I/O
            # thread; a launched process, whose exit ends its attempt, does not pay it;
            # imported here: the close, not the start-up, pays it)
            from melissa_trainer.client.confirm import confirm_close

            confirm_close(self, self._rendezvous, self._following, self._follow_and_close, began)

    @property
    def bye_counts(self) -> list[int]:
        """The steps each receiver's BYE counts (sent to it, or held by it after a follow)."""
        return [steps.count for steps in self._transport.steps]

    @property
    def bye_spans(self) -> list[tuple[int, int] | None]:
        """The least and greatest of the steps each receiver's BYE counts (None: none)."""
        return [steps.span() for steps in self._transport.steps]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # After an exception: deliver what was sent, but no BYE (the run did not finish),
        # and raise nothing that would hide the exception.
        if exc_type is None:
            self.close()
        else:
            try:
                self.close(bye=False)
            except Exception:  # pragma: no cover - close(bye=False) only logs
                client_logger().exception("closing the client after an error failed")
