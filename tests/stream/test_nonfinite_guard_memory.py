"""`NonFiniteGuard` keeps per-client-rank HELLO counts only while a simulation runs:
finished, it keeps its attempt (an int), so 1e5 simulations of 64 client ranks do not
pile up ~2 KB each in a receiver."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from small_ingest import small_ingest

from melissa_trainer.stream.log_summary import LogSummary
from melissa_trainer.stream.nonfinite import NonFiniteGuard
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello

pytestmark = pytest.mark.timeout(60)


def test_finished_simulations_keep_no_per_rank_counts() -> None:
    guard = NonFiniteGuard("fail", LogSummary(logging.getLogger(__name__), "test"), [])
    for sid in range(50):
        for rank in range(64):
            guard.hello(sid, rank)
        guard.finished(sid)
    assert guard._hellos == {}  # (before: 50 dicts of 64 entries)
    assert all(guard.attempt(s) == 1 and guard.helloed(s, 1) for s in range(50))


def test_attempt_is_the_most_per_rank_and_survives_the_finish() -> None:
    guard = NonFiniteGuard("fail", LogSummary(logging.getLogger(__name__), "test"), [])
    guard.hello(7, 0)
    guard.hello(7, 1)
    assert guard.attempt(7) == 1
    guard.hello(7, 1)  # (a restart: rank 1 first)
    guard.hello(7, 0)
    assert guard.attempt(7) == 2
    guard.finished(7)
    assert guard.attempt(7) == 2 and not guard.helloed(7, 3)
    guard.hello(7, 1)  # (it runs again: a new attempt, as before the finish's prune)
    assert guard.attempt(7) == 3 and not guard.failed_now(7)
    guard.hello(7, 0)  # (the same attempt's other client rank)
    assert guard.attempt(7) == 3


def test_an_ingest_drops_the_counts_of_each_simulation_it_finishes() -> None:
    field = FieldSpec("u", np.dtype("<f4"), (2,))
    r = small_ingest()
    for sid in range(20):
        r.hello(Hello(sid, 0, 1, (field,), {"a": float(sid)}))
        payload = np.array([sid, 0], np.float32).tobytes()
        r.data(Data(sid, 0, 0, 1, "u", field.dtype, field.shape, 0, 2, payload), True)
        r.bye(Bye(sid, 0, 1, 1))
    assert r.finished_ids == list(range(20))
    assert r.nonfinite._hellos == {}  # (before: one dict per simulation, never pruned)
    assert r.nonfinite.attempt(19) == 1
