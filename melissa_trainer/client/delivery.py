"""The delivery phase of a close (`closing.close_transport`: what the outbox holds, the
BYE, the arrays ZeroMQ still reads) bounded by ``close_timeout`` *without progress*, as
the receipt phase is (`receipts.Rounds.wait`), not in all.

A trainer alive and reading slowly (a resumed trainer ingesting hundreds of replayed
steps at its sample-to-insert pace, a loaded node) takes the close's messages one by one;
a close bounded in all gave up on it, and the solver's exit lost what was still queued
though the trainer was making progress. So `DeliveryWait` moves its deadline
``close_timeout`` seconds past each progress, and gives up only after ``close_timeout``
seconds in which nothing moved (then in the receipt phase's words, `DeliveryWait.timed_out`).
A close after a failure (no BYE) stays bounded in all by ``failed_close_timeout``: the
simulation is run again and sends everything again, and its exit is not held up.

Progress is what the client sees of its queue without a new wire message:

* a message the socket accepted (a batch of the outbox, a BYE): room was made in
  ZeroMQ's queue, so the trainer read something;
* a frame sent without a copy that ZeroMQ let go of: it was written to the connection.
  Those are the arrays larger than `field_part.INLINE_MAX_BYTES` and the BYE
  (`held.HeldArrays`), and every batch (`outbox.Outbox.in_flight`: its last frame is a
  copy ZeroMQ holds without one more, tracked), the usual way small steps leave.

* the marks among the small steps sent unbatched (``batch_bytes=0``, a send after a
  pause), which ZeroMQ would copy and let go of without a sign: one in
  `marks.MARK_EVERY` (16) of 16 KiB or more, one per `marks.MARK_BYTES` (256 KiB) of
  smaller ones, at least one in `marks.MARK_MOST` (1024), sent without a copy, tracked
  (`marks.Marks`). Before, a queue of them showed nothing until the BYE's release, and a
  trainer slower than ``sndhwm`` messages per ``close_timeout`` failed the close though
  it read them; now it must be slower than 16 such messages of 16 KiB or more, or 1024
  smaller ones, per ``close_timeout`` (the module `marks` says why these).

The C client's close does the same (clients/c/src/close_wait.c).

In all, the phase lasts at most `CLOSE_CAP_FACTOR` times ``close_timeout`` from the
close's start: progress moves the deadline no further (`capped_deadline`, the rule the
receipt phase shares: one budget for the whole close, delivery and receipts together,
`receipts.Rounds.wait`). A receiver that takes a message
now and then (a trickle: a trainer stuck but for a retry loop, a node swapping) kept a
close, and the solver's exit, alive for ever; past the cap the close gives up in
`capped_words` (`DeliveryWait.capped`). A trainer that slow is raised for by raising
``close_timeout``, which moves both bounds. The C client's cap is the same
(``MT_CLOSE_CAP_FACTOR``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from melissa_trainer.client.gave_up import rerun_words
from melissa_trainer.client.handshake_notes import down_note, never_note, pending_note
from melissa_trainer.client.patience import CloseWait

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.held import HeldArrays
    from melissa_trainer.client.marks import Marks
    from melissa_trainer.client.outbox import Outbox

__all__ = [
    "CLOSE_CAP_FACTOR", "DeliveryWait", "cap_bound", "capped_deadline", "capped_words",
    "no_progress_words",
]  # fmt: skip

#: a close's delivery phase lasts at most this many ``close_timeout`` in all, progress or
#: not (module docstring; clients/c/include/melissa_trainer.h MT_CLOSE_CAP_FACTOR)
CLOSE_CAP_FACTOR = 10


def capped_deadline(deadline: float, until: float, cap: float | None) -> tuple[float, bool]:
    """The close's deadline once a progress would put it at `until`: never earlier than
    `deadline`, never past `cap` (the close's start plus `CLOSE_CAP_FACTOR` times
    ``close_timeout``; None: no cap); and whether the cap held it back (the close then
    says `capped_words`). The rule of both phases, and of the C client's (close_wait.c,
    receipt.c)."""
    capped = cap is not None and until > cap
    return max(deadline, cap if cap is not None and capped else until), capped


def cap_bound(setter: str, timeout: float | None) -> str:
    """The bound a close's waiting notice names when the cap in all holds its deadline
    back (the wait then ends at the cap, not ``close_timeout`` after the last progress):
    "SETTER=T s, 10 times it in all: the close's cap" (`setter`: "ClientTuning.
    close_timeout"; C: "mt_set_close_timeout", close_cap.c mt_close_cap_bound, word for
    word). Said by both phases' notices (`DeliveryWait.bound_said`, `receipts`)."""
    return f"{setter}={timeout} s, {CLOSE_CAP_FACTOR} times it in all: the close's cap"


def capped_words(setting: str, timeout: float | None, setter: str, simulation_id: int) -> str:
    """What a close says when its delivery progressed but outlasted `CLOSE_CAP_FACTOR`
    times `timeout` in all, to follow "not delivered within N x SETTING=T s in all to
    [...]": `setter` as `no_progress_words`'s. The C client says the same (close_cap.c)."""
    return (
        f"the receivers took some of them, too slowly to take all (a close waits "
        f"{setting} without progress, and {CLOSE_CAP_FACTOR} times it in all: a receiver "
        f"that takes a message now and then does not hold the exit for ever). A trainer "
        f"alive but this slow: raise the close timeout ({setter}; it moves both bounds); "
        f"then, or for a trainer stuck, {rerun_words(simulation_id)}"
    )


def no_progress_words(setting: str, timeout: float | None, setter: str, simulation_id: int) -> str:
    """What a close says when its delivery made no progress for `timeout` seconds while
    every receiver was connected (the receipt phase's words, adapted: `receipts.Rounds.
    unconfirmed`): `setting` as the message names it ("close_timeout"), `setter` what
    changes it ("ClientTuning.close_timeout"; C: "mt_set_close_timeout"). The C client
    says the same (clients/c/src/close.c)."""
    return (
        f"the receivers took none of them for {setting}={timeout} s (no progress: ZeroMQ "
        f"handed nothing on, the receivers connected but not reading). A trainer alive but "
        f"slower than that (loaded, a high sample-to-insert ratio): raise the close timeout "
        f"({setter}; it bounds a wait without progress); a trainer paused or stuck: once it "
        f"runs again, {rerun_words(simulation_id)}"
    )


class DeliveryWait(CloseWait):
    """A `patience.CloseWait` whose deadline moves ``close_timeout`` seconds past each
    progress of the delivery (module docstring): `watch_progress` names what to look at,
    `until_done` looks after each try. Its `timed_out` says that nothing moved. A close
    after a failure (``after_failure``) stays bounded in all (``failed_close_timeout``).

    Same arguments as `CloseWait`, and `simulation_id` (for the message).
    """

    def __init__(self, *args: object, simulation_id: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._simulation_id = simulation_id
        self._held: HeldArrays | None = None
        self._outbox: Outbox | None = None
        self._marks: Marks | None = None
        self._last = (0, 0)  # (messages accepted, frames still held) at the last look
        #: how many times the deadline moved (for the tests and the curious)
        self.progressed = 0
        #: the deadline progress cannot pass (`CLOSE_CAP_FACTOR`; None: no bound)
        deadline, timeout = self.deadline, self.close_timeout
        self._cap: float | None = None
        if deadline is not None and timeout is not None and not self._after_failure:
            self._cap = deadline + (CLOSE_CAP_FACTOR - 1) * timeout
        #: whether the cap held the deadline back at the last progress (`timed_out`)
        self.capped = False

    def watch_progress(
        self, held: HeldArrays, outbox: Outbox | None, marks: Marks | None = None
    ) -> None:
        """Count progress in `held` (its frames let go of), `outbox` (its batches the
        sockets accepted) and `marks` (the small messages sent unbatched it tracks)."""
        self._held, self._outbox, self._marks = held, outbox, marks
        self._last = self._look()

    def _look(self) -> tuple[int, int]:
        """(batches the sockets accepted, frames ZeroMQ still holds: arrays, BYEs and
        batches sent without a copy)."""
        box = self._outbox
        sent, flying = (0, 0) if box is None else (box.messages_sent, box.in_flight())
        flying += 0 if self._marks is None else self._marks.in_flight()
        return sent, flying + (0 if self._held is None else len(self._held))

    def moved(self, accepted: bool = False) -> bool:
        """Whether the delivery progressed since the last look (`accepted`: a try just
        queued a message); if so, the deadline is put ``close_timeout`` from now."""
        sent, held = self._look()
        before_sent, before_held = self._last
        self._last = (sent, held)
        progressed = accepted or sent > before_sent or held < before_held
        # (a close after a failure stays bounded in all by failed_close_timeout: what it
        # delivers is sent again by the run again, its exit not held by a slow trainer)
        if self._after_failure or not progressed:
            return progressed
        if self.deadline is not None and self.close_timeout is not None:
            until = time.monotonic() + self.close_timeout
            self.deadline, self.capped = capped_deadline(self.deadline, until, self._cap)
            self.progressed += 1
        return progressed

    def until_done(
        self, attempt: Callable[[float], None], *timed_out: type[BaseException]
    ) -> str | None:
        """`CloseWait.until_done`, looking for progress after each try (before the
        deadline is read): a try that returned queued its message (progress)."""

        def looked(end: float) -> None:
            try:
                attempt(end)
            except timed_out:
                self.moved()
                raise
            self.moved(accepted=True)

        return super().until_done(looked, *timed_out)

    def bound_said(self) -> str:
        """`CloseWait.bound_said`, or the cap (`cap_bound`) once it holds the deadline."""
        if self.capped:
            return cap_bound(f"ClientTuning.{self._setting}", self.close_timeout)
        return super().bound_said()

    def timed_out(self) -> str:
        """`CloseWait.timed_out`, then, when it knows nothing else (every receiver
        connected, its handshake done), that nothing moved for ``close_timeout``
        seconds and what to do (`no_progress_words`); or, when the cap ended a wait
        that progressed (`capped`), "within N x SETTING=T s in all to [...]: "
        `capped_words`."""
        if self.capped:
            setting, timeout = self._setting, self.close_timeout
            words = capped_words(setting, timeout, f"ClientTuning.{setting}", self._simulation_id)
            return (
                f"within {CLOSE_CAP_FACTOR} x {setting}={timeout} s in all to "
                f"{list(self._endpoints)}: {words}"
            )
        said = super().timed_out()
        shakes, endpoints = self._handshakes, self._endpoints
        known = (
            shakes is None
            or bool(shakes.not_receivers(endpoints))
            or any(note(shakes, endpoints) for note in (never_note, pending_note, down_note))
        )
        if not known and not self._after_failure:  # (all connected, none reading)
            setting = self._setting
            words = no_progress_words(
                setting, self.close_timeout, f"ClientTuning.{setting}", self._simulation_id
            )
            said += f": {words}"
        return said
