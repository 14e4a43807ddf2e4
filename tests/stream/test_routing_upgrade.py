"""An upgrade in the middle of a study (docs/protocol.md section 3, "Upgrading in the
middle of a study"): a trainer preempted under a version from before the routing key (its
receivers' records of version 3: every simulation routed ``t % W``) resumes under the
current one with a simulation still running. Its launcher restarts that simulation with
the current client library, which reads the resumed receivers' rendezvous: each file lists
the simulation under ``"routed_t_mod_w"``, so the client routes ``t % W`` (its HELLO
without the key), as before the preemption, and every (simulation, step) is trained
exactly once; a new simulation takes the new routing.

The oracle: the samples the old receivers put before the preemption, plus those the two
real resumed receivers put (each drained from its own buffer), each (simulation, step)
once. Before the rendezvous listed the simulation, the restarted client routed
``(s + t) % W``, both receivers refused its HELLO (``hello_mismatch``) and its stream never
ended."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import drain
from small_ingest import recording, small_ingest

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.wire import Data, FieldSpec, Hello
from melissa_trainer.wire.routing import KEPT, SIMULATION_STEP, kept_of

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))
STEPS = 6


def _v3_records(sent: int) -> tuple[list[dict[str, Any]], list[list[tuple[int, int]]]]:
    """The records of 2 receivers of the old version that took simulation 5's steps
    ``0 .. sent - 1``, routed ``t % 2`` (its HELLO had no routing key), and the samples
    each put, by rank."""
    puts: list[list[tuple[int, int]]] = [[], []]
    old = [small_ingest(r, 2, put=recording(puts[r])) for r in range(2)]
    for r in old:
        r.hello(Hello(5, 0, 1, (FIELD,), {"a": 5.0}))
    for t in range(sent):
        old[t % 2].data(_data(5, t), True)
    states = []
    for r in old:
        state = json.loads(json.dumps(r.state_dict()))
        del state["routing"]  # (a version-3 record: no routing recorded)
        states.append(dict(state, version=3))
    return states, puts


def _resumed(stack: ExitStack, rv: Path, state: dict[str, Any], put: int) -> FIFOBuffer:
    """A receiver of the current version resumed from `state` on a buffer that had
    `put` samples put (the buffer's checkpoint: those the old receiver put), started in
    the rendezvous `rv`, expecting simulations 5 and 7; stopped when `stack` closes."""
    buffer = FIFOBuffer(100)
    for _ in range(put):  # (the resumed buffer's put count, against which the record loads)
        buffer.put({"x": np.zeros(1, np.float32)})
    assert len(buffer.get_batch(put, timeout=1)) == put
    config = ReceiverConfig(rendezvous_dir=str(rv), expected_simulations=2)
    receiver = Receiver(buffer, state["rank"], 2, config)
    receiver.load_state_dict(state)
    receiver.start()
    stack.callback(receiver.stop)
    return buffer


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The rendezvous directory, as the launcher sets it for the simulations it starts."""
    rv = tmp_path / "rendezvous"
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rv))
    monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", "2")
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    yield rv


def _simulation(sid: int) -> str | None:
    """Run simulation `sid` (all its steps) with the current client; its routing."""
    tuning = ClientTuning(close_timeout=20)
    with Client({"u": ((2,), "f4")}, {"a": float(sid)}, sid, tuning=tuning) as c:
        for t in range(STEPS):
            c.send(t, u=np.full(2, t, np.float32))
        return c.routing


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_simulation_running_across_an_upgrade_trains_each_step_once(launched: Path) -> None:
    states, before = _v3_records(3)
    with ExitStack() as stack:
        buffers = [_resumed(stack, launched, states[r], len(before[r])) for r in range(2)]
        files = fetch_rendezvous(launched, 10)
        assert [(e["routing"], e[KEPT]) for e in files] == [(SIMULATION_STEP, [5])] * 2
        assert _simulation(5) is None  # t % W, as before the preemption
        assert _simulation(7) == SIMULATION_STEP  # a new simulation: the new routing
        after = [
            [(int(s["simulation_id"]), int(s["time_step"])) for s in drain(b)] for b in buffers
        ]
    trained = sorted(before[0] + before[1] + after[0] + after[1])
    assert trained == [(s, t) for s in (5, 7) for t in range(STEPS)]
    # simulation 5's steps went to rank t % 2 again, 7's to (7 + t) % 2
    assert all((t + (s == 7)) % 2 == r for r in range(2) for s, t in before[r] + after[r])


def test_an_older_client_rerunning_a_simulation_begun_with_the_new_routing() -> None:
    """The reverse: a study of the current version (simulations routed ``(s + t) % W``)
    resumed, and a simulation rerun with a client from before the routing key (its HELLO
    without it: ``t % W``). Where the two routings differ (s % W != 0) nothing can take
    its steps exactly once (the receivers hold them by the first routing): its HELLO is
    refused (``hello_mismatch``) and listed in `refused` with words naming both routings
    and the fix, so that the launcher fails it with them at once (before, it waited for
    the simulation's exit and said its data did not all arrive); its steps sent to
    another receiver than the first routing's are rejected, none is taken twice. Where
    they agree (s % W == 0) its HELLO is accepted and every step taken once (before, it
    was refused too)."""
    puts: list[list[tuple[int, int]]] = [[], []]
    old = [small_ingest(r, 2, put=recording(puts[r])) for r in range(2)]
    for sid in (4, 5):
        for r in old:
            r.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}, routing=SIMULATION_STEP))
        for t in range(3):
            old[(sid + t) % 2].data(_data(sid, t), True)
    states = [json.loads(json.dumps(r.state_dict())) for r in old]
    again: list[list[tuple[int, int]]] = [[], []]
    new = [small_ingest(r, 2, put=recording(again[r])) for r in range(2)]
    for r, state in zip(new, states, strict=True):
        r.load_state_dict(state, len(puts[r.rank]))
        assert kept_of(r.sims, r.shifted) == {}  # (nothing listed: both began new)
    for sid in (4, 5):
        for r in new:
            r.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))  # (no routing key)
        for t in range(STEPS):
            new[t % 2].data(_data(sid, t), True)
    trained = sorted(puts[0] + puts[1] + again[0] + again[1])
    assert [t for s, t in trained if s == 4] == list(range(STEPS))
    assert [t for s, t in trained if s == 5] == [0, 1, 2]  # each once; the rest refused
    for r in new:
        assert r.rejected["hello_mismatch"] == 1 and r.rejected["wrong_receiver"] == 3
        [(sid, why)] = r.refused
        assert sid == 5 and "t % W (no routing key)" in why and "'simulation_step'" in why
        assert "current client library" in why


def _data(sid: int, t: int) -> Data:
    payload = np.full(2, t, np.float32).tobytes()
    return Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)
