"""The record a receiver's ingest keeps in a checkpoint: its version, the upgrade of
older versions, and how it is taken (`state_of`) and restored (`restore`).

The record holds, per simulation with a ledger, its declaration and the bit array of
the steps received (`SimulationLedger.to_state`), the finished simulations archived
(`Archive.to_state`: two arrays), the simulations given up, the study's schema,
the counters, and the keys of the last samples put (``recent``): the trainer snapshots
the buffer before this record, so the samples recorded after the buffer's snapshot are
forgotten at `restore` and accepted again when re-sent. Called by the ingester alone
(see `IngestLoop.snapshot`); not thread-safe.
"""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from melissa_trainer.stream.assembly import REJECT_REASONS, SimulationLedger

if TYPE_CHECKING:
    from melissa_trainer.stream.ingest import Ingest

__all__ = ["COUNTERS", "STATE_VERSION", "TAIL_COUNTERS", "restore", "state_of", "upgrade_state"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: 3: finished simulations may be archived (``"archive"``; absent in 2, which loads as
#: is); 2: a simulation's BYE counts are the steps sent to this receiver (protocol 2); in
#: 1 they were over all receivers (see `upgrade_state`)
STATE_VERSION = 3
#: the ingest's counters, in telemetry order: these, the rejections, then the tail
COUNTERS = ("messages", "bytes", "samples_put", "duplicates")
TAIL_COUNTERS = (
    "simulations_finished",
    "simulations_abandoned",
    "incomplete_dropped",
    "ignored_after_end",
    "nonfinite_refused",
)


def upgrade_state(state: dict[str, Any]) -> dict[str, Any]:
    """A receiver state of an earlier version as the current version (a new dict).

    Version 1 (protocol 1) recorded each client rank's BYE count over all receivers,
    and a receiver took its steps to be those t < count with t % world_size == rank.
    Version 2 counts the steps sent to this receiver, so a version-1 count becomes the
    number of such t (the same with one receiver): the simulation finishes as it would
    have under version 1.
    """
    version = state.get("version")
    if version == STATE_VERSION:
        return state
    if version == 2:  # the same, with nothing archived
        return dict(state, version=STATE_VERSION)
    if version != 1:
        raise ValueError(f"unknown receiver state version {version!r}")
    rank, world = int(state["rank"]), int(state["world_size"])
    sims = {
        sid: dict(rec, byes={r: len(range(rank, int(n), world)) for r, n in rec["byes"].items()})
        for sid, rec in state["simulations"].items()
    }
    return dict(state, version=STATE_VERSION, simulations=sims)


def state_of(ing: Ingest) -> dict[str, Any]:
    """The dedup record (JSON-serializable; bit arrays and recent keys as base64)."""
    recent = np.array(list(ing.recent), dtype="<u8").reshape(-1)
    counters = {k: int(v) for k, v in ing.telemetry().items()}
    # A snapshot taken while a put blocks records its samples (marked, in `recent`):
    # count them as put too, so that `restore` subtracts, from a counter that has them,
    # those the buffer's snapshot lacks (without this a resume was one sample short,
    # a whole batch with BATCH messages). Those the put had already placed before the
    # snapshot are in the buffer's count and stay counted.
    counters["samples_put"] += ing.in_flight
    return {
        "version": STATE_VERSION,
        "rank": ing.rank,
        "world_size": ing.world,
        "simulations": {str(s): rec.to_state() for s, rec in ing.sims.items()},
        "archive": ing.archive.to_state(),
        "abandoned": sorted(ing.abandoned),
        "replaced": sorted(ing.replaced),
        "schema": ing.schema.to_json(),
        "marked": ing.marked,
        "recent": base64.b64encode(recent.tobytes()).decode("ascii"),
        "counters": counters,
    }


def restore(ing: Ingest, state: dict[str, Any], buffer_put: int) -> None:
    """Restore a `state_of` record into `ing`, which has seen nothing yet.

    `buffer_put` is the restored buffer's put count. The trainer snapshots the
    buffer before this record, so the samples recorded after the buffer's snapshot
    (the last ``marked - buffer_put`` keys) are not in it: they are forgotten here
    and accepted again when re-sent.
    """
    ing.sims = {
        int(s): SimulationLedger.from_state(int(s), rec) for s, rec in state["simulations"].items()
    }
    ing.archive.load_state(state.get("archive"))
    both = ing.sims.keys() & ing.archive.steps.keys()
    if both:  # one or the other, never both: which steps it has would be ambiguous
        raise ValueError(
            f"invalid receiver state: simulation {min(both)} has both a ledger and an archive entry"
        )
    raw = np.frombuffer(base64.b64decode(state["recent"], validate=True), "<u8")
    ing.recent.extend((int(s), int(t)) for s, t in raw.reshape(-1, 2))
    counters = state["counters"]
    for key in (*COUNTERS, "incomplete_dropped", "ignored_after_end"):
        setattr(ing, key, int(counters.get(key, 0)))
    ing.nonfinite.refused = int(counters.get("nonfinite_refused", 0))  # (absent before)
    ing.rejected.update({r: int(counters.get(f"rejected_{r}", 0)) for r in REJECT_REASONS})
    ing.abandoned = {int(s) for s in state.get("abandoned", [])}
    ing.replaced = {int(s) for s in state.get("replaced", [])}
    ing.schema.load_json(state.get("schema"))
    behind = int(state["marked"]) - buffer_put
    if behind > len(ing.recent) or behind < 0:
        logger.warning(
            "receiver record (%d samples) and buffer (%d put) disagree beyond the "
            "recent list: some samples may be lost or seen twice",
            state["marked"],
            buffer_put,
        )
    forgotten = 0
    for _ in range(max(0, min(behind, len(ing.recent)))):
        sim, t = ing.recent.pop()
        if sim in ing.sims:
            rec = ing.sims[sim]
            # A step forgotten here was not in the buffer's snapshot: its simulation
            # is not finished after all (it must re-send that step), and its put is
            # not counted (it is counted again when the step is put again).
            if rec.unmark(t // ing.world):
                forgotten += 1
                rec.finished = False
    ing.samples_put = max(0, ing.samples_put - forgotten)
    ing.finished_ids = list(ing.archive.steps)
    for sid, rec in ing.sims.items():
        if rec.finished:  # archived after `recent_size` more puts, as if finished now
            ing.finished_ids.append(sid)
            ing.archive.finished(sid, buffer_put)
    ing.simulations_finished = len(ing.finished_ids)
    ing.marked = buffer_put
    for rec in list(ing.sims.values()):  # complete already (an upgraded state)
        if not rec.finished and len(rec.byes) >= rec.client_count:
            ing.check_finished(rec)
