"""The launcher's heartbeat (`IngestQueries.activity`) copies the ledgers in one step
that no other code can interrupt, while the ingester adds and archives them.

``list(self.sims.items())`` is not such a step on Python 3.11: its tuples are allocated
one by one, an allocation may start a garbage collection, a collected object's
finalizer runs Python code, and at that point the interpreter may hand over to another
thread: the ingester, whose new or archived ledger changed the dict's size mid-copy.
The launcher's thread then failed with ``RuntimeError('dictionary changed size during
iteration')`` (tests/launcher/test_scale.py, once, on a loaded machine: a heartbeat read
at every worker's request, thousands in a run). `dict.copy` allocates no object per
entry. Here the interruption is made certain, in one thread: a finalizer that adds a
ledger runs at every collection, and a collection runs at every allocation (on
CPython 3.10 and 3.11, the tests' interpreter here; 3.12 defers collections to the evaluation
loop, where the old copy is not interrupted either and this test cannot fail)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from melissa_trainer.stream.ingest_queries import IngestQueries

LEDGERS = 5000  # more than the 2,000 two-item tuples CPython keeps for reuse


@dataclass
class Ledger:
    messages: int
    finished: bool = False


class Intruder:
    """Garbage whose finalizer adds a ledger (as the ingester does) and leaves the
    next intruder as garbage, up to `left` times: each collection meets one."""

    def __init__(self, sims: dict[int, Any], left: int) -> None:
        self.sims, self.left, self.me = sims, left, self  # (a cycle: the collector's)

    def __del__(self) -> None:
        key = -self.left  # (ids the test's ledgers do not use)
        self.sims[key] = Ledger(1)
        if self.left > 1:
            Intruder(self.sims, self.left - 1)


@pytest.fixture
def collect_at_every_allocation() -> Iterator[None]:
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    gc.collect()
    gc.enable()
    gc.set_threshold(1)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if not enabled:
            gc.disable()
        gc.collect()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("collect_at_every_allocation")
def test_the_heartbeat_copy_is_not_interrupted_by_a_finalizer_that_adds_a_ledger() -> None:
    queries = IngestQueries()
    sims: dict[int, Any] = {sid: Ledger(sid % 7) for sid in range(LEDGERS)}
    queries.sims = sims
    Intruder(sims, left=50)  # garbage now: collected (adding a ledger) at any allocation
    beats = queries.activity()
    # every ledger of the copy, each with its count: those added meanwhile may be in it
    assert {sid: beats[sid] for sid in range(LEDGERS)} == {s: s % 7 for s in range(LEDGERS)}
    assert set(beats) <= set(sims)
    assert len(sims) > LEDGERS  # (the finalizers ran: the test tested something)
