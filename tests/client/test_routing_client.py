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
from helpers import drain, running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.wire.routing import SIMULATION_STEP

SIMULATIONS = 4


def _receivers(stack: ExitStack, rv: Path) -> list[FIFOBuffer]:
    buffers = [FIFOBuffer(100), FIFOBuffer(100)]
    for rank in range(2):
        stack.enter_context(
            running(
                buffers[rank],
                rank=rank,
                world_size=2,
                rendezvous_dir=str(rv),
                expected_simulations=SIMULATIONS,
            )
        )
    return buffers


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
        buffers = _receivers(stack, launched)
        assert {e["routing"] for e in fetch_rendezvous(launched, 10)} == {SIMULATION_STEP}
        for sid in range(SIMULATIONS):
            _one_step(sid, None)
        got = [sorted(int(s["simulation_id"]) for s in drain(b)) for b in buffers]
    # (before the routing: [0, 1, 2, 3] on rank 0, nothing on rank 1)
    assert got == [[0, 2], [1, 3]]


@pytest.mark.timeout(60)
def test_a_client_given_its_endpoints_keeps_the_old_routing(launched: Path) -> None:
    with ExitStack() as stack:
        buffers = _receivers(stack, launched)
        endpoints = [e["endpoint"] for e in fetch_rendezvous(launched, 10)]
        for sid in range(SIMULATIONS):
            _one_step(sid, endpoints)
        got = [sorted(int(s["simulation_id"]) for s in drain(b)) for b in buffers]
    assert got == [[0, 1, 2, 3], []]  # t % W: every step 0 on rank 0
