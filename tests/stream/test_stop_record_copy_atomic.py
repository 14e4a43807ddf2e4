"""The stop record (`stop_record.build_record`) copies the ledgers, and each ledger's
BYEs, in one step that no other code can interrupt: the receiver builds it after its
ingester stopped, or after a bounded wait for a stuck one (`Receiver.stop`), which may
then still add ledgers and BYEs while they are read.

``list(ingest.sims.items())`` and ``sorted(ledger.byes.items())`` were not such steps
on Python 3.11: their tuples are allocated one by one, an allocation may start a garbage
collection, a collected object's finalizer runs Python code, and there the interpreter
may hand over to the ingester (tests/stream/test_activity_copy_atomic.py, the
heartbeat's same race). Here the interruption is made certain, in one thread, as there:
a finalizer that adds a ledger (or a BYE) runs at every collection, and a collection at
every allocation (CPython 3.10 and 3.11; 3.12 defers collections to the evaluation
loop, where the old copy is not interrupted either and the control cannot be).

Failed before: the library's case raised "dictionary changed size during iteration"
as the control does (both the ledgers' copy and the BYEs'). A fresh interpreter of its
own, for the reason the heartbeat's test gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.e2e,
    pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 defers collections"),
]

SCRIPT = r"""
import gc, json
from dataclasses import dataclass, field
from types import SimpleNamespace
from melissa_trainer.stream.stop_record import StopReason, build_record

MANY = 5000  # more than the 2,000 two-item tuples CPython keeps for reuse

@dataclass
class Ledger:
    completed: int
    finished: bool = False
    byes: dict = field(default_factory=dict)
    done: bytearray = field(default_factory=bytearray)

class Intruder:
    # garbage whose finalizer adds an entry to `into` (as the ingester adds a ledger or
    # a BYE) and leaves the next intruder as garbage, up to `left` times
    def __init__(self, into, value, left):
        self.into, self.value, self.left, self.me = into, value, left, self  # (a cycle)

    def __del__(self):
        self.into[MANY + self.left] = self.value  # (keys after those below)
        if self.left > 1:
            Intruder(self.into, self.value, self.left - 1)

def ingest(sims):
    return SimpleNamespace(
        sims=sims, nonfinite=SimpleNamespace(by_simulation={}), finished_ids=[],
        archive=SimpleNamespace(steps={}), expected=None, rank=0, world=1, shifted=set(),
        unfinished=lambda: sorted(s for s, r in sims.copy().items() if not r.finished),
    )

def attempt(read, where):
    # `read` of an ingest of MANY ledgers (or one ledger of MANY BYEs) while a finalizer
    # that adds one may run at any allocation
    if where == "sims":
        sims = {sid: Ledger(sid % 7, byes={0: sid % 7} if sid < 3 else {}) for sid in range(MANY)}
        into, value = sims, Ledger(1, finished=True)
    else:
        sims = {0: Ledger(3, byes={rank: 3 for rank in range(MANY)})}
        into, value = sims[0].byes, 3
    gc.collect()
    gc.enable()
    gc.set_threshold(1)  # a collection at every allocation
    # garbage now: collected at any allocation, one a collection (as many as the
    # entries: some are left when the copy comes, whatever was allocated before it)
    Intruder(into, value, left=MANY)
    try:
        said, error = read(ingest(sims)), None
    except RuntimeError as exc:
        said, error = None, str(exc)
    gc.set_threshold(700)
    added = len(into) - MANY  # (what the finalizers added, the read's copy begun)
    return {"error": error, "said": said, "added": added}

def library(ingest):
    return build_record(ingest, "run", StopReason())["byes"][:3]

def old(ingest):
    # the copies of before: a tuple per entry
    [r.completed for _, r in list(ingest.sims.items())]
    return [sorted(r.byes.items()) for r in ingest.sims.values()][:1]

print(json.dumps({
    where: {"control": attempt(old, where), "library": attempt(library, where)}
    for where in ("sims", "byes")
}))
"""


def test_the_stop_record_copy_is_not_interrupted_by_a_finalizer_that_adds_a_ledger() -> None:
    root = str(Path(__file__).parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=50, cwd=root
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for where, expected in (
        ("sims", [[0, 0, 0, 0, 0], [1, 0, 1, 1, 0], [2, 0, 2, 2, 0]]),
        ("byes", [[0, 0, 3, 3, 0], [0, 1, 3, 3, 0], [0, 2, 3, 3, 0]]),
    ):
        # the set-up interrupts a copy that allocates per entry (the test tests something)
        control = out[where]["control"]["error"] or ""
        assert "changed size during iteration" in control, (where, out[where]["control"])
        library = out[where]["library"]
        assert library["error"] is None, (where, library["error"])
        # (the finalizers still ran through the read, after its copy: there was what to
        # interrupt; a few ran before it, at the allocations that precede it)
        assert library["added"] > 1000, (where, library)
        # (sid, client rank, its BYE's count, steps held, refused), the first three
        assert library["said"] == expected, (where, library["said"])
