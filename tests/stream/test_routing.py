"""Which receiver takes which step (docs/protocol.md section 3; `wire.routing`): a HELLO
with ``"routing": "simulation_step"`` routes its simulation's step t to receiver
``(simulation_id + t) % W``, one without it ``t % W``; a receiver records each
simulation's routing from its first HELLO and judges its DATA and BATCH by it
(``wrong_receiver``), keeps it in its checkpoint record, and refuses a later HELLO of
the simulation that names another routing (``hello_mismatch``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from small_ingest import recording, small_ingest

from melissa_trainer import wire
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.wire import Batch, Data, FieldSpec, Hello
from melissa_trainer.wire.routing import (
    KEPT,
    SIMULATION_STEP,
    first_step,
    kept_of,
    receiver_of,
    routing_of_entries,
)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def ingest(rank: int, world: int, puts: list[tuple[int, int]]) -> Ingest:
    return small_ingest(rank, world, put=recording(puts), recent_size=4)


def hello(sid: int, routing: str | None) -> Hello:
    return Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}, routing=routing)


def data(sid: int, t: int) -> Data:
    payload = np.array([sid, t], np.float32).tobytes()
    return Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)


def test_the_routing_functions() -> None:
    # t % W without the key; (s + t) % W with it, for ids beyond 2**63 too
    assert [receiver_of(5, t, 3, None) for t in range(4)] == [0, 1, 2, 0]
    assert [receiver_of(5, t, 3, SIMULATION_STEP) for t in range(4)] == [2, 0, 1, 2]
    big = 2**64 - 1
    assert receiver_of(big, 1, 3, SIMULATION_STEP) == (big + 1) % 3
    # a one-step simulation goes to rank s % W: a study's simulations spread
    assert [receiver_of(s, 0, 2, SIMULATION_STEP) for s in range(4)] == [0, 1, 0, 1]
    # local step i of rank r is the time step i * W + first_step
    for s in range(5):
        for r in range(3):
            for i in range(4):
                t = i * 3 + first_step(s, r, 3, SIMULATION_STEP)
                assert receiver_of(s, t, 3, SIMULATION_STEP) == r and t // 3 == i
    # the new routing only when every rendezvous file advertises it
    assert routing_of_entries([{"routing": SIMULATION_STEP}] * 2) == SIMULATION_STEP
    assert routing_of_entries([{"routing": SIMULATION_STEP}, {}]) is None
    assert routing_of_entries([{"routing": "other"}]) is None
    assert routing_of_entries([]) is None
    # ... and none lists the simulation as one that keeps t % W (`KEPT`: an upgrade)
    kept = [{"routing": SIMULATION_STEP, KEPT: [5, 2**64 - 1]}, {"routing": SIMULATION_STEP}]
    assert routing_of_entries(kept, 5) is None
    assert routing_of_entries(kept, 2**64 - 1) is None
    assert routing_of_entries(kept, 6) == SIMULATION_STEP
    assert routing_of_entries(kept) == SIMULATION_STEP  # (no id: nothing to look up)
    odd = [{"routing": SIMULATION_STEP, KEPT: v} for v in ("5", [True], ["5"], [5.0], None)]
    assert all(routing_of_entries([e], 5) == SIMULATION_STEP for e in odd[:4])  # not ints
    assert routing_of_entries([odd[4]], 1) == SIMULATION_STEP
    # what a receiver lists: its ledgers not routed (s + t) % W, none in the usual case
    assert kept_of({3: 0, 1: 0, 2: 0}, {2}) == {KEPT: [1, 3]}
    assert kept_of([2], {2}) == {} and kept_of([], set()) == {}


def test_the_hello_key_round_trips_and_an_unknown_routing_is_refused() -> None:
    frame = wire.encode_hello(3, 0, 1, (FIELD,), {"a": 1.0}, routing=SIMULATION_STEP)
    assert wire.decode(frame).routing == SIMULATION_STEP  # type: ignore[union-attr]
    old = wire.encode_hello(3, 0, 1, (FIELD,), {"a": 1.0})
    assert b"routing" not in old and wire.decode(old).routing is None  # type: ignore[union-attr]
    body = json.dumps({"fields": [{"name": "u", "dtype": "<f4", "shape": [2]}],
                       "routing": "sideways"}).encode()  # fmt: skip
    head = wire.PREFIX.pack(wire.MAGIC, wire.VERSION, wire.HELLO, 0, 3)
    bad = head + wire.HELLO_FIXED.pack(0, 1, len(body)) + body
    with pytest.raises(wire.ProtocolError) as info:
        wire.decode(bad)
    assert info.value.reason == "bad_hello" and "sideways" in str(info.value)
    with pytest.raises(ValueError, match="routing must be one of"):
        wire.encode_hello(3, 0, 1, (FIELD,), routing="sideways")


@pytest.mark.parametrize("routing", [None, SIMULATION_STEP])
def test_each_receiver_takes_the_steps_its_routing_gives_it(routing: str | None) -> None:
    puts: list[list[tuple[int, int]]] = [[], []]
    ranks = [ingest(r, 2, puts[r]) for r in range(2)]
    for sid in (4, 5):
        for r in ranks:
            r.hello(hello(sid, routing))
        for t in range(5):
            for r in ranks:  # every step to both: the wrong one rejects it
                r.data(data(sid, t), True)
    for rank, r in enumerate(ranks):
        want = [(s, t) for s in (4, 5) for t in range(5) if receiver_of(s, t, 2, routing) == rank]
        assert puts[rank] == want
        assert r.rejected["wrong_receiver"] == 10 - len(want)
    if routing is None:  # the old routing: t % W whatever the simulation
        assert {t % 2 for _, t in puts[1]} == {1}
    else:  # simulation 5's step 0 on rank 1, 4's on rank 0
        assert (5, 0) in puts[1] and (4, 0) in puts[0]


def test_one_step_simulations_spread_over_the_ranks() -> None:
    puts: list[list[tuple[int, int]]] = [[], []]
    ranks = [ingest(r, 2, puts[r]) for r in range(2)]
    for sid in range(4):
        for r in ranks:
            r.hello(hello(sid, SIMULATION_STEP))
        ranks[receiver_of(sid, 0, 2, SIMULATION_STEP)].data(data(sid, 0), True)
    assert puts == [[(0, 0), (2, 0)], [(1, 0), (3, 0)]]


@pytest.mark.parametrize("routing", [None, SIMULATION_STEP])
def test_a_batch_is_judged_by_its_simulations_routing(routing: str | None) -> None:
    puts: list[tuple[int, int]] = []
    r = ingest(1, 2, puts)
    r.hello(hello(7, routing))
    mine = [t for t in range(8) if receiver_of(7, t, 2, routing) == 1]
    steps = np.array(mine, np.uint64)
    payloads = np.array([[7, t] for t in mine], np.float32)
    batch = Batch(7, len(mine), 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, steps, payloads)
    r.batch(batch)
    assert puts == [(7, t) for t in mine] and r.rejected["wrong_receiver"] == 0
    # the other rank's steps, in any order: each rejected
    theirs = [t for t in range(8) if t not in mine][::-1]
    other = Batch(
        7, len(theirs), 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2,
        np.array(theirs, np.uint64), np.array([[7, t] for t in theirs], np.float32),
    )  # fmt: skip
    r.batch(other)
    assert len(puts) == len(mine) and r.rejected["wrong_receiver"] == len(theirs)


@pytest.mark.parametrize(("first", "then"), [(None, SIMULATION_STEP), (SIMULATION_STEP, None)])
def test_a_hello_naming_another_routing_than_the_first_is_refused(
    first: str | None, then: str | None
) -> None:
    puts: list[tuple[int, int]] = []
    r = ingest(0, 2, puts)
    r.hello(hello(9, first))
    r.hello(hello(9, first))  # the same again (a restart): accepted
    assert r.rejected["hello_mismatch"] == 0
    r.hello(hello(9, then))
    assert r.rejected["hello_mismatch"] == 1
    # the first routing stays: its steps are judged by it
    t = next(t for t in range(4) if receiver_of(9, t, 2, first) == 0)
    r.data(data(9, t), True)
    assert puts == [(9, t)]
    # refused for a finished simulation too (archived), whose record keeps its routing
    r.bye(wire.Bye(9, 0, 1, 1))
    assert r.finished_ids == [9]
    r.hello(hello(9, then))
    assert r.rejected["hello_mismatch"] == 2


def test_the_record_keeps_each_simulations_routing() -> None:
    puts: list[tuple[int, int]] = []
    r = ingest(0, 2, puts)
    r.hello(hello(3, SIMULATION_STEP))
    r.hello(hello(4, None))
    state = json.loads(json.dumps(r.state_dict()))
    assert state["version"] == 4 and state["routing"] == {SIMULATION_STEP: [3]}
    again = ingest(0, 2, [])
    again.load_state_dict(state, 0)
    assert again.shifted == {3}
    again.data(data(3, 1), True)  # (3 + 1) % 2 == 0: this rank's
    again.data(data(4, 1), True)  # 1 % 2 == 1: not this rank's
    assert again.rejected["wrong_receiver"] == 1 and again.samples_put == 1


def test_a_record_from_before_the_routing_resumes_its_simulations_routed_t_mod_w() -> None:
    """A version-3 record (no ``"routing"``: every simulation routed ``t % W``) upgraded
    as a receiver loads it: the resumed receivers list its running simulation in their
    rendezvous files (`kept_of`, ``"routed_t_mod_w"``), so its client, restarted with the
    current library, routes ``t % W`` again (`routing_of_entries`) and each of its steps
    is taken once; a client that ignored the list (or a hand-written HELLO) naming the new
    routing is still refused (the steps recorded here were routed the old way), while a
    new simulation takes the new routing. (With real receivers and a real client:
    test_routing_upgrade.py.)"""
    from melissa_trainer.common.migrations import upgrade

    puts: list[list[tuple[int, int]]] = [[], []]
    old = [ingest(r, 2, puts[r]) for r in range(2)]
    for r in old:
        r.hello(hello(5, None))
    for t in range(3):
        old[t % 2].data(data(5, t), True)
    states = []
    for r in old:
        state = json.loads(json.dumps(r.state_dict()))
        del state["routing"]
        states.append(dict(state, version=3))
    again: list[list[tuple[int, int]]] = [[], []]
    new = [ingest(r, 2, again[r]) for r in range(2)]
    for r, state in zip(new, states, strict=True):
        r.load_state_dict(upgrade("receiver", state), len(puts[r.rank]))
        assert r.shifted == set()
    # the rendezvous files the resumed receivers write, and the restarted client's routing
    files = [{"routing": SIMULATION_STEP, **kept_of(r.sims, r.shifted)} for r in new]
    assert [f[KEPT] for f in files] == [[5], [5]]
    routing = routing_of_entries(files, 5)
    assert routing is None  # (before the list: "simulation_step", refused by both)
    for r in new:
        r.hello(hello(5, routing))
    for t in range(6):
        new[receiver_of(5, t, 2, routing)].data(data(5, t), True)
    assert sorted(puts[0] + puts[1] + again[0] + again[1]) == [(5, t) for t in range(6)]
    assert sum(r.rejected["wrong_receiver"] + r.rejected["hello_mismatch"] for r in new) == 0
    new[0].hello(hello(5, SIMULATION_STEP))
    assert new[0].rejected["hello_mismatch"] == 1
    assert routing_of_entries(files, 6) == SIMULATION_STEP
    new[0].hello(hello(6, SIMULATION_STEP))
    assert new[0].shifted == {6} and new[0].rejected["hello_mismatch"] == 1
