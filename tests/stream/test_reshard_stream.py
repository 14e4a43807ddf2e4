"""Resharding the receivers' records from k ranks to m (`melissa_trainer.stream.reshard`).

Real `Ingest`s of k ranks receive real messages (routed ``t % k``, or ``(s + t) % k`` for
a simulation whose HELLO says ``"routing": "simulation_step"``: `wire.routing`); their
records are resharded, loaded into `Ingest`s of m ranks, and every step of every
simulation is sent again, routed over the m ranks as its HELLO says. The oracle, a
multiset of (simulation, step) kept here: the samples the old buffers held plus those
the new ingests put hold each step once.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from small_ingest import recording, small_ingest

from melissa_trainer import Launcher
from melissa_trainer.sources.iterable import IterableSource
from melissa_trainer.sources.source import Source
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.reshard import reshard_states
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study.study import Study
from melissa_trainer.wire import Abandon, Bye, Data, FieldSpec, Hello
from melissa_trainer.wire.routing import SIMULATION_STEP, receiver_of

pytestmark = pytest.mark.timeout(120)

RESIZES = [(1, 2), (2, 1), (2, 3), (3, 2), (3, 1), (1, 3)]
FIELD = FieldSpec("u", np.dtype("<f4"), (2,))
RECENT = 6  # small: finished simulations are archived during the run

#: simulation id -> its time steps; the order below is the order they run
STEPS = {
    1: list(range(12)),  # finished early: archived
    2: list(range(0, 22, 2)),  # irregular numbering (every other step), finished
    3: list(range(9)),  # abandoned midway
    4: list(range(15)),  # finished
    5: list(range(20)),  # mid-flight at the checkpoint (no BYE)
    6: list(range(10)),  # finished last: its last samples are not in the buffer snapshot
}
SENT_BEFORE = {3: 5, 5: 11}  # steps sent before the checkpoint (the others: all)
ABANDONED = {3}
MID_FLIGHT = {5}


class Rank:
    """One receiver's ingest and the (simulation, step) of every sample it put."""

    def __init__(self, rank: int, world: int, max_pending: int = 8) -> None:
        self.puts: list[tuple[int, int]] = []
        self.ingest = small_ingest(
            rank, world, put=recording(self.puts), max_pending=max_pending, recent_size=RECENT
        )


#: how the simulations route their steps: all ``t % W``, all ``(s + t) % W``, or mixed
#: (odd ids ``(s + t) % W``: clients of two versions in one study)
MODES = ["step", "simulation_step", "mixed"]


def routing_of(sid: int, mode: str) -> str | None:
    if mode == "simulation_step" or (mode == "mixed" and sid % 2):
        return SIMULATION_STEP
    return None


def hello(sid: int, mode: str = "step") -> Hello:
    return Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}, routing=routing_of(sid, mode))


def data(sid: int, t: int) -> Data:
    payload = np.array([sid, t], np.float32).tobytes()
    return Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)


def run(ranks: list[Rank], sid: int, steps: list[int], bye: bool, mode: str = "step") -> None:
    """One simulation's messages, each step to its receiver (as its routing says)."""
    world, routing = len(ranks), routing_of(sid, mode)
    for r in ranks:
        r.ingest.hello(hello(sid, mode))
    for t in steps:
        ranks[receiver_of(sid, t, world, routing)].ingest.data(data(sid, t), True)
    if bye:
        for j, r in enumerate(ranks):
            sent = sum(1 for t in STEPS[sid] if receiver_of(sid, t, world, routing) == j)
            r.ingest.bye(Bye(sid, 0, 1, sent))


def old_world(k: int, mode: str = "step") -> tuple[list[Rank], list[int]]:
    """k receivers after the first run; the buffer put counts of their snapshots (the
    buffer snapshot is taken first: the last 2 samples of rank 0 are not in it)."""
    ranks = [Rank(r, k) for r in range(k)]
    for sid, steps in STEPS.items():
        sent = steps[: SENT_BEFORE[sid]] if sid in SENT_BEFORE else steps
        run(ranks, sid, sent, bye=sid not in SENT_BEFORE, mode=mode)
        if sid in ABANDONED:
            for r in ranks:
                r.ingest.abandon(Abandon(sid))
    buffer_puts = [len(r.puts) - (2 if i == 0 else 0) for i, r in enumerate(ranks)]
    return ranks, buffer_puts


def records(ranks: list[Rank]) -> list[dict[str, Any]]:
    """Each rank's record as the checkpoint has it (a JSON round trip)."""
    return [json.loads(json.dumps(r.ingest.state_dict(), sort_keys=True)) for r in ranks]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("k", "m"), RESIZES)
def test_every_step_is_put_once_across_the_resize(k: int, m: int, mode: str) -> None:
    old, buffer_puts = old_world(k, mode)
    states = records(old)
    assert any(s["archive"]["ids"] for s in states)  # some simulation was archived
    held = [key for r, n in zip(old, buffer_puts, strict=True) for key in r.puts[:n]]
    new = [Rank(j, m) for j in range(m)]
    for j, r in enumerate(new):
        state = reshard_states(states, buffer_puts, j, m, buffer_put=3 * j + 1)
        assert state == reshard_states(states, buffer_puts, j, m, buffer_put=3 * j + 1)
        r.ingest.load_state_dict(json.loads(json.dumps(state)), 3 * j + 1)

    # right after loading: finished where every old rank had it finished, nowhere else
    finished = {1, 2, 4}
    for r in new:
        assert set(r.ingest.finished_ids) == finished
        assert set(r.ingest.unfinished()) == set(STEPS) - finished - ABANDONED
        assert r.ingest.abandoned == ABANDONED
        assert not r.puts
    # the trainer's sums over ranks: the old totals, on new rank 0
    samples_put = sum(r.ingest.samples_put for r in new)
    assert samples_put == len(held) == new[0].ingest.samples_put

    # every simulation sends every step again, routed over the new ranks
    for sid in STEPS:
        run(new, sid, STEPS[sid], bye=True, mode=mode)
    again = [key for r in new for key in r.puts]
    everything = Counter((sid, t) for sid, steps in STEPS.items() for t in steps)
    assert Counter(held) + Counter(again) == everything  # each step exactly once
    for r in new:
        assert not r.ingest.unfinished()
        assert set(STEPS) - ABANDONED <= set(r.ingest.finished_ids)


@pytest.mark.parametrize("mode", MODES)
def test_a_resume_on_as_many_ranks_puts_every_step_once(mode: str) -> None:
    """No reshard: each rank loads its own record, which keeps each simulation's routing."""
    old, buffer_puts = old_world(2, mode)
    states = records(old)
    held = [key for r, n in zip(old, buffer_puts, strict=True) for key in r.puts[:n]]
    new = [Rank(j, 2) for j in range(2)]
    for j, r in enumerate(new):
        r.ingest.load_state_dict(states[j], buffer_puts[j])
    for sid in STEPS:
        run(new, sid, STEPS[sid], bye=True, mode=mode)
    again = [key for r in new for key in r.puts]
    everything = Counter((sid, t) for sid, steps in STEPS.items() for t in steps)
    assert Counter(held) + Counter(again) == everything  # each step exactly once
    assert sum(r.ingest.rejected["wrong_receiver"] for r in new) == 0
    for r in new:
        assert not r.ingest.unfinished()


def test_a_finished_study_resized_puts_nothing_again() -> None:
    old = [Rank(r, 2) for r in range(2)]
    for sid in (1, 2, 4):
        run(old, sid, STEPS[sid], bye=True)
    states = records(old)
    puts = [len(r.puts) for r in old]
    new = [Rank(j, 3) for j in range(3)]
    for j, r in enumerate(new):
        r.ingest.load_state_dict(reshard_states(states, puts, j, 3, 0), 0)
        assert r.ingest.all_finished() and set(r.ingest.finished_ids) == {1, 2, 4}
    for sid in (1, 2, 4):
        run(new, sid, STEPS[sid], bye=True)
    assert not any(r.puts for r in new)
    assert sum(r.ingest.duplicates for r in new) == sum(len(STEPS[s]) for s in (1, 2, 4))


def test_the_records_own_correction_is_right_for_the_new_buffer() -> None:
    old, buffer_puts = old_world(2)
    state = reshard_states(records(old), buffer_puts, 1, 3, buffer_put=17)
    assert state["marked"] == 17 and state["recent"] == ""
    assert (state["rank"], state["world_size"]) == (1, 3)
    assert all(v == 0 for v in state["counters"].values())  # totals are on rank 0


def test_a_record_of_another_rank_or_world_is_refused() -> None:
    old, buffer_puts = old_world(2)
    states = records(old)
    with pytest.raises(ValueError, match="old rank 0 of 2 says rank 1 of 2"):
        reshard_states(states[::-1], buffer_puts, 0, 1, 0)
    with pytest.raises(ValueError, match="out of range"):
        reshard_states(states, buffer_puts, 3, 3, 0)


def test_a_running_simulation_without_a_declaration_anywhere_is_refused() -> None:
    old = [Rank(r, 2) for r in range(2)]
    run(old, 1, STEPS[1], bye=True)
    run(old, 4, STEPS[4], bye=True)  # rank 0 archives simulation 1
    states = records(old)
    assert json.loads(json.dumps(states[0]))["archive"]["ids"]
    states[1]["simulations"].pop("1", None)  # rank 1 never had its HELLO ...
    states[1]["archive"] = {"ids": "", "steps": ""}  # ... nor finished it
    with pytest.raises(ValueError, match="simulation 1 is running.*declaration"):
        reshard_states(states, [len(r.puts) for r in old], 0, 1, 0)


def test_sources_say_whether_they_reshard() -> None:
    assert IterableSource([]).reshard_state([{}, {}], [3, 4], 0, 3, 2) == {}
    with pytest.raises(ValueError, match="IterableSource cannot be resumed on another number"):
        IterableSource([]).reshard_state([{}, {"x": 1}], [3, 4], 0, 3, 2)

    old, buffer_puts = old_world(2)
    states = records(old)
    stream = StreamSource(ReceiverConfig())
    assert stream.reshard_state(states, buffer_puts, 0, 1, 5) == reshard_states(
        states, buffer_puts, 0, 1, 5
    )
    assert stream.reshard_state([{}, {}], [0, 0], 0, 1, 0) == {}
    with pytest.raises(ValueError, match="resume it with Study"):
        stream.reshard_state([dict(states[0], launcher={}), states[1]], buffer_puts, 0, 1, 5)
    assert isinstance(stream, Source)


def test_a_study_gives_the_launchers_record_to_new_rank_0_alone(tmp_path: Path) -> None:
    launcher = Launcher([sys.executable, "-c", "pass"], [{"a": 1.0}], 1)
    study = Study(launcher, StreamSource(ReceiverConfig()))
    old, buffer_puts = old_world(2)
    states = records(old)
    record = {"the": "launcher's record"}
    states[0] = dict(states[0], launcher=record)
    shares = [study.reshard_state(states, buffer_puts, j, 3, 0) for j in range(3)]
    assert shares[0]["launcher"] == record
    assert all("launcher" not in s for s in shares[1:])
    plain = [{k: v for k, v in s.items() if k != "launcher"} for s in states]
    for j, s in enumerate(shares):
        assert {k: v for k, v in s.items() if k != "launcher"} == reshard_states(
            plain, buffer_puts, j, 3, 0
        )


TWO = (FieldSpec("u", np.dtype("<f4"), (2,)), FieldSpec("v", np.dtype("<f4"), (2,)))


def part(sid: int, t: int, name: str) -> Data:
    payload = np.array([sid, t], np.float32).tobytes()
    return Data(sid, t, 0, 1, name, np.dtype("<f4"), (2,), 0, 2, payload)


@pytest.mark.parametrize(("k", "m"), RESIZES)
def test_steps_lost_in_assembly_are_owed_after_the_resize(k: int, m: int) -> None:
    """A partial sample dropped (the pending bound) counts as done for finishing and
    is accepted when sent again: it stays owed on the new ranks."""
    steps = range(12)
    old = [Rank(r, k, max_pending=1) for r in range(k)]
    for r in old:
        r.ingest.hello(Hello(7, 0, 1, TWO, {"a": 7.0}))
    for t in steps:  # steps 0, 4, 8: one field only, dropped when the next one starts
        old[t % k].ingest.data(part(7, t, "u"), True)
        if t % 4:
            old[t % k].ingest.data(part(7, t, "v"), True)
    for j, r in enumerate(old):
        r.ingest.bye(Bye(7, 0, 1, sum(1 for t in steps if t % k == j)))
        assert r.ingest.finished_ids == [7]
    held = [key for r in old for key in r.puts]
    assert sorted(held) == [(7, t) for t in steps if t % 4]
    states = records(old)
    new = [Rank(j, m) for j in range(m)]
    for j, r in enumerate(new):
        r.ingest.load_state_dict(reshard_states(states, [len(r.puts) for r in old], j, m, 0), 0)
        assert r.ingest.finished_ids == [7]  # finished: its lost steps count as done
        lost = {t // m for t in (0, 4, 8) if t % m == j}
        if lost:  # (a rank with none may hold it archived)
            assert r.ingest.sims[7].lost == lost
        r.ingest.hello(Hello(7, 0, 1, TWO, {"a": 7.0}))
    for t in steps:
        new[t % m].ingest.data(part(7, t, "u"), True)
        new[t % m].ingest.data(part(7, t, "v"), True)
    again = [key for r in new for key in r.puts]
    assert Counter(held) + Counter(again) == Counter((7, t) for t in steps)
