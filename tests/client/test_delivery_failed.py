"""`DeliveryFailed`: every error a `Client`'s send or close gives up on its trainer with
is one (a worker reports its simulation failed and goes on: `worker.serve_simulations`),
still a `TimeoutError` as these errors were; a refusal of the simulation or of the
handshake is not one (the solver's or its configuration's, not a trainer gone)."""

from __future__ import annotations

import pytest

from melissa_trainer.client import DeliveryFailed, SimulationNotNeeded, SimulationRefused
from melissa_trainer.client.closing import TrainerPreempted, TrainerStopped
from melissa_trainer.client.follow import FollowError, Superseded, Unanswered
from melissa_trainer.client.gave_up import Preempted
from melissa_trainer.client.send_errors import ReceiverGone, SendPreempted, StoppedForGood
from melissa_trainer.client.stop_kinds import NotNeededWhileSending


@pytest.mark.parametrize(
    "error",
    [
        ReceiverGone, SendPreempted, StoppedForGood, NotNeededWhileSending, TrainerStopped,
        TrainerPreempted, Preempted, SimulationNotNeeded, FollowError, Unanswered, Superseded,
    ],
)  # fmt: skip
def test_each_give_up_is_a_delivery_failure_and_a_timeout(error: type[Exception]) -> None:
    assert issubclass(error, DeliveryFailed) and issubclass(error, TimeoutError)


def test_a_refusal_is_not_one() -> None:
    assert not issubclass(SimulationRefused, DeliveryFailed)
    assert issubclass(DeliveryFailed, TimeoutError) and DeliveryFailed is not TimeoutError
