"""A receiver archives its finished simulations (`stream.archive`): the ledgers it keeps
stay O(running) in a long study, and every (simulation, step) still reaches the buffer
exactly once across checkpoints taken at any point, resumes that re-send everything,
and simulations that run again."""

from __future__ import annotations

import base64
import json
import random
from collections import Counter

import numpy as np
import pytest

from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))
RECENT = 8  # the ingest's recent list: a finished ledger is archived 8 puts later


def ingest(puts: list[tuple[int, int]], expected: int | None = None) -> Ingest:
    def put(sample: dict[str, np.ndarray]) -> bool:
        puts.append((int(sample["simulation_id"]), int(sample["time_step"])))
        return True

    return Ingest(
        0,
        1,
        put=put,
        end=lambda why: None,
        expected=expected,
        max_field_bytes=1 << 20,
        max_pending=8,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 20,
        recent_size=RECENT,
    )


def run(ing: Ingest, sid: int, steps: range, bye: bool = True) -> None:
    """One simulation: HELLO, one DATA per step, BYE."""
    ing.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))
    for t in steps:
        payload = np.array([sid, t], np.float32).tobytes()
        ing.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    if bye:
        ing.bye(Bye(sid, 0, 1, len(steps)))


def test_finished_ledgers_are_archived_and_their_steps_stay_duplicates() -> None:
    puts: list[tuple[int, int]] = []
    ing = ingest(puts, expected=100)
    for sid in range(100):
        run(ing, sid, range(3))
    assert len(ing.archive) >= 100 - RECENT  # the last ones wait for 8 more puts
    assert len(ing.sims) <= RECENT
    assert ing.simulations_finished == 100 and len(ing.finished_ids) == 100
    run(ing, 5, range(3))  # archived: runs again (HELLO, DATA, BYE)
    assert ing.duplicates == 3 and len(puts) == 300
    assert "has all its 3 steps" in ing.describe(5)
    assert ing.sims[5].finished  # revived by its HELLO: a ledger again, finished
    ing.data(Data(7, 1, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, b"\0" * 8), True)
    assert ing.duplicates == 4  # a DATA without HELLO of an archived one: a duplicate
    assert sum(ing.rejected.values()) == 0


def test_a_ledger_with_sparse_steps_is_kept_whole() -> None:
    puts: list[tuple[int, int]] = []
    ing = ingest(puts)
    run(ing, 1, range(0, 30, 10))  # steps 0, 10, 20: not 0 .. n-1
    for sid in range(2, 12):
        run(ing, sid, range(2))
    assert 1 not in ing.archive and ing.sims[1].finished
    assert 2 in ing.archive


@pytest.mark.parametrize("seed", range(6))
def test_every_step_once_across_checkpoints_at_any_point(seed: int) -> None:
    """A study of 60 simulations x 4 steps; at random points a checkpoint is taken
    with the buffer's snapshot up to `RECENT` samples behind the record (the trainer
    snapshots the buffer first), through JSON; the receiver restarts from it and every
    simulation runs again from its first step. The buffer's content (the puts up to
    each snapshot, then the rest) has each (simulation, step) once."""
    rng = random.Random(seed)
    kept: list[tuple[int, int]] = []  # what the restored buffers hold, in order
    puts: list[tuple[int, int]] = []
    ing = ingest(puts, expected=60)
    order = [sid for sid in range(60) for _ in range(4)]
    rng.shuffle(order)
    progress = Counter[int]()
    started: set[int] = set()
    for i, sid in enumerate(order):
        if sid not in started:
            ing.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))
            started.add(sid)
        t = progress[sid]
        progress[sid] += 1
        payload = np.array([sid, t], np.float32).tobytes()
        ing.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
        if progress[sid] == 4:
            ing.bye(Bye(sid, 0, 1, 4))
        if i % 37 == 36:  # a checkpoint, the process killed, a resume
            behind = rng.randint(0, RECENT)
            state = json.loads(json.dumps(ing.state_dict(), sort_keys=True))
            kept.extend(puts[: len(puts) - behind])
            fresh: list[tuple[int, int]] = []
            ing = ingest(fresh, expected=60)
            ing.load_state_dict(state, buffer_put=int(state["marked"]) - behind)
            puts = fresh
            for again in sorted(started):  # every simulation begun runs again
                progress[again] = 0
                ing.hello(Hello(again, 0, 1, (FIELD,), {"a": float(again)}))
    for sid in sorted(started):  # the last attempts send what they have not yet
        for t in range(progress[sid], 4):
            payload = np.array([sid, t], np.float32).tobytes()
            ing.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
        ing.bye(Bye(sid, 0, 1, 4))
    kept.extend(puts)
    assert Counter(kept) == Counter({(s, t): 1 for s in range(60) for t in range(4)})
    assert ing.simulations_finished == 60


def test_a_version_2_state_loads_with_nothing_archived() -> None:
    puts: list[tuple[int, int]] = []
    ing = ingest(puts)
    run(ing, 1, range(3))
    state = ing.state_dict()
    state["version"] = 2
    del state["archive"]
    again = ingest([])
    again.load_state_dict(json.loads(json.dumps(state)), buffer_put=3)
    assert again.simulations_finished == 1 and len(again.archive) == 0
    run(again, 1, range(3))
    assert again.duplicates == 3


def test_a_corrupt_archive_is_refused() -> None:
    ing = ingest([])
    state = ing.state_dict()
    state["archive"] = {"ids": "AAAAAAAAAAA=", "steps": ""}  # one id, no count
    with pytest.raises(ValueError, match="archive"):
        ingest([]).load_state_dict(state, buffer_put=0)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


ONE = (1).to_bytes(8, "little")
CORRUPT_ARCHIVES = {
    "bad base64": ({"ids": "AAAA!!!=", "steps": b64(ONE)}, "Only base64"),
    "ids not whole numbers": ({"ids": b64(ONE + b"xyz"), "steps": b64(ONE)}, "multiple"),
    "ids not a string": ({"ids": 5, "steps": b64(ONE)}, "bytes-like"),
    "no steps": ({"ids": b64(ONE)}, "'steps'"),
    "lengths differ": ({"ids": b64(ONE * 2), "steps": b64(ONE)}, "2 ids and 1 step counts"),
    "an id twice": ({"ids": b64(ONE * 2), "steps": b64(ONE * 2)}, "an id is listed twice"),
    "negative count": ({"ids": b64(ONE), "steps": b64((-1).to_bytes(8, "little", signed=True))},
                       "a negative step count"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CORRUPT_ARCHIVES))
def test_a_corrupt_archive_is_refused_naming_the_archive(case: str) -> None:
    """Before, bad base64 or a length not a multiple of 8 raised numpy's or binascii's
    error (nothing said it was the receiver's archive), and an id listed twice loaded."""
    archive, error = CORRUPT_ARCHIVES[case]
    state = dict(ingest([]).state_dict(), archive=archive)
    with pytest.raises(ValueError, match=f"invalid receiver archive: .*{error}"):
        ingest([]).load_state_dict(state, buffer_put=0)


def test_a_simulation_both_archived_and_with_a_ledger_is_refused() -> None:
    """Before, it loaded: the ledger won for the dedup, and the simulation counted
    twice among the finished ones."""
    ing = ingest([])
    run(ing, 1, range(3))
    state = ing.state_dict()
    state["archive"] = {"ids": b64(ONE), "steps": b64((3).to_bytes(8, "little"))}
    with pytest.raises(ValueError, match="simulation 1 has both a ledger and an archive"):
        ingest([]).load_state_dict(json.loads(json.dumps(state)), buffer_put=3)
