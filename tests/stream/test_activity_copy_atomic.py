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
loop, where the old copy is not interrupted either and this test cannot fail).

It runs in a fresh interpreter of its own: in the suite's worker, another thread's
collection (a receiver's, left by an earlier test) could be under way when this one's
allocations came, which then collect nothing (collections do not nest), and the
finalizers ran after the checks (seen once in the inner tier: 5000 ledgers, none
added)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(60), pytest.mark.e2e]

SCRIPT = r"""
import gc, json
from dataclasses import dataclass
from melissa_trainer.stream.ingest_queries import IngestQueries

LEDGERS = 5000  # more than the 2,000 two-item tuples CPython keeps for reuse

@dataclass
class Ledger:
    messages: int
    finished: bool = False

class Intruder:
    # garbage whose finalizer adds a ledger (as the ingester does) and leaves the next
    # intruder as garbage, up to `left` times: each collection meets one
    def __init__(self, sims, left):
        self.sims, self.left, self.me = sims, left, self  # (a cycle: the collector's)

    def __del__(self):
        self.sims[-self.left] = Ledger(1)  # (ids the ledgers below do not use)
        if self.left > 1:
            Intruder(self.sims, self.left - 1)

def attempt(copy):
    # `copy` of 5000 ledgers while a finalizer that adds one may run at any allocation
    sims = {sid: Ledger(sid % 7) for sid in range(LEDGERS)}
    gc.collect()
    gc.enable()
    gc.set_threshold(1)  # a collection at every allocation
    Intruder(sims, left=50)  # garbage now: collected (adding a ledger) at any allocation
    try:
        copied, error = copy(sims), None
    except RuntimeError as exc:
        copied, error = {}, str(exc)
    gc.set_threshold(700)
    return {
        "error": error,
        "copied": {str(s): copied[s] for s in range(LEDGERS) if s in copied},
        "extra": sorted(set(copied) - set(sims)),
    }

def library(sims):
    queries = IngestQueries()
    queries.sims = sims
    return queries.activity()

# the control: the copy of before (a tuple per entry), which the set-up must interrupt
control = attempt(lambda sims: {s: r.messages for s, r in list(sims.items())})
print(json.dumps({"control": control, "library": attempt(library)}))
"""


def test_the_heartbeat_copy_is_not_interrupted_by_a_finalizer_that_adds_a_ledger() -> None:
    root = str(Path(__file__).parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=50, cwd=root
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the set-up interrupts a copy that allocates per entry (the test tests something)
    assert "dictionary changed size during iteration" in (out["control"]["error"] or "")
    library = out["library"]
    assert library["error"] is None, library["error"]
    # every ledger of the copy, each with its count: those added meanwhile may be in it
    assert library["copied"] == {str(s): s % 7 for s in range(5000)}
    assert library["extra"] == []
