"""`Draining`: how many of a simulation's steps a receiver has put into its buffer, as
opposed to marked (decoded and recorded: `StepLedger.completed`).

A receipt's "not yet" answer tells a closing client the steps the receiver holds
(`follow_answers.receipt_of`); the client keeps waiting while that count grows
(`melissa_trainer.client.receipts`). A BATCH (many steps) is marked at once, when
decoded, before its samples wait for room in the buffer: counted at decode, a close
whose last steps came as one BATCH would see no progress while that batch drains, and
could give up (``close_timeout``) though the trainer progresses. So the ingester tells
this object, before it marks a multi-step message, which simulation and how many of its
steps were marked before, with the feeder's count of samples put so far (`start`); the
follow thread then counts those steps plus what the feeder has put since (`steps`).

Exact because samples reach the buffer in order and a message is decoded only once
everything before it is in the buffer (`Feeder`; the receiver's loop flushes first):
the samples not in the buffer are always those of the last message. A message of one
step (DATA) is not told: it counts at decode, one step early at most. A step refused
for NaN or Inf under ``nonfinite="refuse"`` is marked and never put: the ingester says
so (`refused`), and it counts as put from then on (else the count stayed short by it
until the next start; a batch that goes record by record is started too).

Threads: `start` by the ingester, `steps` by the follow thread, without a lock: one
tuple store and single reads, in an order that can under-count for a moment (a
receipt then says fewer steps than a moment before: the client keeps the most it was
told), never over-count (which would hide the progress of the batch it counted early).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Draining"]


class Draining:
    """The steps of the simulation whose samples are draining into the buffer.

    Args:
        put_count: samples put into the buffer so far (monotone: `Feeder.put_count`);
            None: unknown (puts that return once the sample is in), every step counts
            once marked.
    """

    def __init__(self, put_count: Callable[[], int] | None = None) -> None:
        self._put_count = put_count
        #: (simulation id, its steps marked before, samples put before) of the last start
        self._last: tuple[int, int, int] | None = None

    def start(self, simulation_id: int, completed: int) -> None:
        """Before marking a message's steps of `simulation_id`, which had `completed`
        steps marked (the ingester, once everything before is in the buffer)."""
        if self._put_count is not None:
            self._last = (simulation_id, completed, self._put_count())

    def steps(self, simulation_id: int, completed: int) -> int:
        """The steps of `simulation_id` in the buffer, of the `completed` it has marked
        (read by the caller before this call: see the module docstring)."""
        last, count = self._last, self._put_count
        if last is None or count is None or last[0] != simulation_id:
            return completed
        # what was put since the start is this simulation's first (the rest of its
        # message, in order), then later messages' (of any simulation: capped)
        return min(completed, last[1] + count() - last[2])

    def refused(self, simulation_id: int) -> None:
        """A step of `simulation_id` was marked and will never be put (refused for NaN
        or Inf): counted as put (the ingester, when it marks it). Of the message
        started last only; any other simulation's steps count once marked already.
        Counted as of that moment: ahead of the samples before it in its message that
        still wait for room in the buffer (early by the steps refused, at most)."""
        last = self._last
        if last is not None and last[0] == simulation_id:
            self._last = (simulation_id, last[1], last[2] - 1)
