"""What a blocked send raises when it gives up on its trainer (`send_wait`): a receiver
gone (`ReceiverGone`, a `TimeoutError`, as `send` documents), one whose trainer's stop
record says it was preempted (`SendPreempted`), or says that the run ended or failed
(`StoppedForGood`, whose subclass per kind of stop `stopped` defines).

Imports only the standard library and `gave_up`. `send_wait`, which raises them, imports
them and keeps them importable from it, where the client's modules import them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from melissa_trainer.client.gave_up import DeliveryFailed, Preempted

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.gave_up import StopSaid

__all__ = ["ReceiverGone", "SendPreempted", "StoppedForGood"]


class ReceiverGone(DeliveryFailed):
    """A blocked send gave up: a receiver stayed disconnected for `disconnected_timeout`
    seconds (the trainer died, or its node). A `TimeoutError`, as `send` documents."""


class SendPreempted(ReceiverGone, Preempted):
    """A blocked send gave up on a receiver gone whose trainer's stop record says it was
    preempted (`SendWait.preempted`): its message says so where a `ReceiverGone`'s says
    "the trainer died, or its node", in a close's words (`closing.TrainerPreempted`). A
    client that follows restarted trainers waits for the resumed one, and if none comes
    says so and what to do (`follow_words.follow_gave_up`)."""


class StoppedForGood(ReceiverGone):
    """A blocked send gave up on a receiver disconnected whose trainer's stop record says
    that the run ended or failed (`StopRecords.for_good`): no trainer comes back there,
    so a client that follows restarted trainers raises it at once rather than wait
    `follow_timeout` for one (`following`). The message is the close's sentence
    (`gave_up.stop_sentence`).

    Attributes:
        said: the record's parts.
    """

    def __init__(self, message: str, said: StopSaid) -> None:
        super().__init__(message)
        self.said = said

    def __reduce__(self) -> tuple[type[StoppedForGood], tuple[str, StopSaid]]:
        # Exceptions pickle as ``type(*args)``: without this, one raised in a
        # multiprocessing/concurrent.futures worker could not be sent back to its parent
        return type(self), (str(self.args[0]), self.said)

    @classmethod
    def of(cls, said: StopSaid) -> type[StoppedForGood]:
        """The subclass to raise for `said`: the one whose other base is ``said.error``
        (its kind's, defined once in `stopped`, which made `said`: `SimulationNotNeeded`,
        `SimulationRefused`, `TrainerStopped`), so that what catches a close's error
        catches a send's too; this class if none is."""
        for kind in cls.__subclasses__():
            if said.error in kind.__bases__:  # (not issubclass: SimulationNotNeeded is a
                return kind  # TrainerStopped, whose kind is another)
        return cls
