"""`closing.stop_first`: what a close says when a stop record explained why its messages
were not delivered is one sentence composed from the record's parts (`StopSaid`), the
reason first, for each kind of stop and each kind of message not delivered. (The
sentences in a real close: tests/client/test_close_not_needed.py and
test_close_stop_record.py.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.closing import TrainerStopped, stop_first
from melissa_trainer.client.gave_up import StopSaid
from melissa_trainer.client.stop_kinds import SimulationNotNeeded

EP = "tcp://127.0.0.1:5555"
T: Any = SimpleNamespace(simulation_id=4, rank=1)


def said(kind: Any, reason: str, error: type[Exception]) -> StopSaid:
    return StopSaid(EP, kind, reason, "FACTS. FIX", error)


@pytest.mark.parametrize(
    ("failure", "bye", "what"),
    [
        ("queued messages", True, "its queued messages (the BYE among them) were"),
        ("queued messages", False, "its queued messages were"),
        ("BYE", True, "its BYE was"),
        ("batched data", True, "its batched data were"),
    ],
)
def test_the_reason_opens_the_sentence_then_what_was_not_delivered_and_where(
    failure: str, bye: bool, what: str
) -> None:
    not_needed = said(
        "not_needed", "the study ended without needing this simulation", SimulationNotNeeded
    )
    assert stop_first(T, failure, bye, not_needed) == (
        "simulation 4 rank 1: the study ended without needing this simulation, so "
        f"{what} not delivered to {EP}: FACTS. FIX"
    )
    refused = said("refused", "the trainer stopped on its time step 3", SimulationRefused)
    assert stop_first(T, failure, bye, refused) == (
        "simulation 4 rank 1: the trainer stopped on its time step 3, so "
        f"{what} not delivered to {EP}: FACTS. FIX"
    )
    ended = said("ended", "end: max_steps 9 reached; its stop record in /r", TrainerStopped)
    which = what.replace(" were", ", which were").replace(" was", ", which was")
    assert stop_first(T, failure, bye, ended) == (
        f"simulation 4 rank 1: the trainer stopped before it read {which} not delivered "
        f"to {EP} (end: max_steps 9 reached; its stop record in /r). FACTS. FIX"
    )


def test_a_stop_said_is_frozen() -> None:
    stop = said("ended", "x", TrainerStopped)
    with pytest.raises(AttributeError, match="cannot assign to field 'reason'"):
        stop.reason = "y"  # type: ignore[misc]


@pytest.mark.parametrize(("failure", "bye"), [("queued messages", True), ("BYE", True)])
def test_the_receivers_down_are_named_and_the_one_whose_record_said_why(
    failure: str, bye: bool
) -> None:
    """Another receiver than the record's is down: the messages not delivered are its
    (the record's receiver may be connected and have taken its own), and the record's
    receiver is named as the one that said why; its own being down alone, as before."""
    a, b = "tcp://a:1", "tcp://b:2"
    note = f"disconnected; its receiver at {EP} recorded why"
    ended = said("ended", "error: OOM; its stop record in /r", TrainerStopped)
    text = stop_first(T, failure, bye, ended, (a, b))
    assert f"not delivered to {a}, {b} ({note}: error: OOM; its stop record in /r). " in text
    refused = said("refused", "the trainer stopped on its time step 3", SimulationRefused)
    text = stop_first(T, failure, bye, refused, (a,))
    assert text.startswith("simulation 4 rank 1: the trainer stopped on its time step 3, so ")
    assert text.endswith(f"not delivered to {a} ({note}): FACTS. FIX"), text
    assert stop_first(T, failure, bye, refused, (EP,)) == stop_first(T, failure, bye, refused)
