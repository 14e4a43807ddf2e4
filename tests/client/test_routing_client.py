"""One-step simulations (a steady-state solver's) spread over the training ranks: a
Python client that reads a rendezvous whose receivers advertise ``"routing":
"simulation_step"`` sends simulation s's step t to receiver ``(s + t) % W``
(docs/protocol.md section 3), and says so in its HELLO; one given its endpoints keeps
``t % W`` (an older trainer may be listening), and so puts every step 0 on rank 0.

The oracle: two real receivers, each draining its own buffer; the samples each took."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pytest
from helpers import drain
from two_receivers import two_receivers

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.following import steps_to_send
from melissa_trainer.client.replay import ReplayWindow
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire import HELD_STEPS, HeldReply
from melissa_trainer.wire.routing import SIMULATION_STEP, receiver_of

SIMULATIONS = 4


def _one_step(sid: int, endpoints: list[str] | None) -> None:
    tuning = ClientTuning(close_timeout=20)
    with Client({"u": ((3,), "f4")}, {"a": float(sid)}, sid, endpoints, tuning=tuning) as c:
        c.send(0, u=np.full(3, sid, np.float32))


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The rendezvous directory, as the launcher sets it for the simulations it starts
    (no replay window, no receipt at close: the launcher restarts them)."""
    rv = tmp_path / "rendezvous"
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rv))
    monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", "1")
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    yield rv


@pytest.mark.timeout(60)
def test_one_step_simulations_read_from_the_rendezvous_spread_over_both_ranks(
    launched: Path,
) -> None:
    with ExitStack() as stack:
        buffers, _ = two_receivers(stack, launched, SIMULATIONS)
        assert {e["routing"] for e in fetch_rendezvous(launched, 10)} == {SIMULATION_STEP}
        for sid in range(SIMULATIONS):
            _one_step(sid, None)
        got = [sorted(int(s["simulation_id"]) for s in drain(b)) for b in buffers]
    # (before the routing: [0, 1, 2, 3] on rank 0, nothing on rank 1)
    assert got == [[0, 2], [1, 3]]


@pytest.mark.timeout(60)
def test_a_client_given_its_endpoints_keeps_the_old_routing(launched: Path) -> None:
    with ExitStack() as stack:
        buffers, _ = two_receivers(stack, launched, SIMULATIONS)
        endpoints = [e["endpoint"] for e in fetch_rendezvous(launched, 10)]
        for sid in range(SIMULATIONS):
            _one_step(sid, endpoints)
        got = [sorted(int(s["simulation_id"]) for s in drain(b)) for b in buffers]
    assert got == [[0, 1, 2, 3], []]  # t % W: every step 0 on rank 0


@pytest.mark.parametrize("routing", [None, SIMULATION_STEP])
def test_a_follow_asks_each_step_of_the_receiver_its_routing_gave_it(routing: str | None) -> None:
    """`following.steps_to_send`: a HELD reply's bit i is the receiver's local step i, a
    time step only by the simulation's routing (docs/protocol.md section 17)."""
    window = ReplayWindow(1 << 10)
    sent = [StepSet(), StepSet()]
    for t in range(6):
        window.record(t, {"u": np.full(3, t, np.float32)})
        sent[receiver_of(3, t, 2, routing)].add(t)
    # receiver 0 holds its local step 0, receiver 1 its local steps 0 and 1
    replies = [
        HeldReply(3, 1, 0, 2, HELD_STEPS, 1, bytes([0b01])),
        HeldReply(3, 1, 1, 2, HELD_STEPS, 2, bytes([0b11])),
    ]
    every, needed = steps_to_send(sent, replies, window, "simulation 3", "", 3, routing)
    assert every == list(range(6))
    # t % 2: receiver 0 holds step 0, receiver 1 steps 1 and 3; (3 + t) % 2: receiver 0
    # holds step 1 (its first), receiver 1 steps 0 and 2
    assert needed == ([2, 4, 5] if routing is None else [3, 4, 5])
