"""The ingest's checkpoint record: what `IngestState.state_dict` writes, what
`IngestState.load_state_dict` restores, and what a follow socket answers of it
(`held_of`).

The record is per rank: each receiver records the time steps sent to it (those the
simulation's routing gives its rank: `wire.routing`; the record keeps which
simulations said ``"simulation_step"``, under ``"routing"``), so resuming on another
number of ranks merges the k old records and re-splits them by step for the new number
of ranks: `melissa_trainer.stream.reshard`.
Its version is `STATE_VERSION`; the upgrade of earlier versions is
`common.migrations`' ("receiver"). These functions read and write the `IngestState`
they are given through its public attributes; it calls them, from the ingester's
thread (or before that thread starts), as its methods' bodies.
"""

from __future__ import annotations

import base64
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from melissa_trainer import wire as protocol
from melissa_trainer.common.migrations import CURRENT
from melissa_trainer.common.words import plural
from melissa_trainer.stream.assembly import REJECT_REASONS
from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.wire.routing import SIMULATION_STEP

if TYPE_CHECKING:
    from melissa_trainer.stream.ingest_state import IngestState

__all__ = [
    "BUFFER_SAVED_FIRST",
    "STATE_VERSION",
    "held_now",
    "held_of",
    "lag_problem",
    "load_record",
    "record_of",
]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: 4: each simulation's routing (``"routing"``: the ids routed ``(s + t) % W``; the
#: others, and every one of an older record, ``t % W``);
#: 3: finished simulations may be archived (``"archive"``); 2: a simulation's BYE counts
#: are the steps sent to this receiver (protocol 2); in 1 they were over all receivers
STATE_VERSION = CURRENT["receiver"]
#: the record's key (true) saying its checkpoint saved the buffer's snapshot before it
#: (`checkpoint.registry.SAVE_FIRST`, since 2026-11-29), so that the buffer is never
#: ahead of it. A record without it (an older version's: the record first, the buffer
#: after it, the receiver putting on meanwhile) may find its buffer a few puts ahead:
#: resumed with a warning (`lag_problem`). A key, not a version: the record's format is
#: unchanged, and a version bump would make an older reader refuse these checkpoints
BUFFER_SAVED_FIRST = "buffer_saved_first"


def record_of(ingest: IngestState) -> dict[str, Any]:
    """`ingest`'s dedup record (`IngestState.state_dict`, which documents it)."""
    ingest.archive_due()
    recent = np.array(list(ingest.recent), dtype="<u8").reshape(-1)
    counters = {k: int(v) for k, v in ingest.telemetry().items()}
    # A snapshot taken while a put blocks records its samples (marked, in `recent`):
    # count them as put too, so that `load_record` subtracts, from a counter that
    # has them, those the buffer's snapshot lacks (without this a resume was one
    # sample short, a whole batch with BATCH messages). Those the put had already
    # placed before the snapshot are in the buffer's count and stay counted.
    counters["samples_put"] += ingest.in_flight
    return {
        "version": STATE_VERSION,
        "rank": ingest.rank,
        "world_size": ingest.world,
        "simulations": {str(s): rec.to_state() for s, rec in ingest.sims.items()},
        "archive": ingest.archive.to_state(),
        "routing": {SIMULATION_STEP: sorted(ingest.shifted)},
        "abandoned": sorted(ingest.abandoned),
        "replaced": sorted(ingest.replaced),
        "schema": ingest.schema.to_json(),
        # the parameters' order learned from a HELLO (None: given, or none yet)
        "parameter_order": None if ingest.schema.parameters else ingest.schema.order,
        "marked": ingest.marked,
        "recent": base64.b64encode(recent.tobytes()).decode("ascii"),
        "counters": counters,
        # (taken by `checkpoint.registry.write` after the buffer's snapshot: SAVE_FIRST;
        # `IngestLoop.snapshot` is its only writer of checkpoints)
        BUFFER_SAVED_FIRST: True,
    }


def load_record(ingest: IngestState, state: dict[str, Any], buffer_put: int) -> None:
    """Restore a `record_of` record of the current version into `ingest`, which has
    seen nothing yet (`IngestState.load_state_dict`, which documents `buffer_put`)."""
    ingest.sims = {
        int(s): StepLedger.from_state(int(s), rec) for s, rec in state["simulations"].items()
    }
    ingest.archive.load_state(state.get("archive"))
    routing = state.get("routing") or {}  # (absent: none, as a record of version < 4)
    ingest.shifted = {int(s) for s in routing.get(SIMULATION_STEP, [])}
    both = ingest.sims.keys() & ingest.archive.steps.keys()
    if both:  # one or the other, never both: which steps it has would be ambiguous
        raise ValueError(
            f"invalid receiver state: simulation {min(both)} has both a ledger and an archive entry"
        )
    raw = np.frombuffer(base64.b64decode(state["recent"], validate=True), "<u8")
    # room for every key saved (the list grows with the largest message: `keep_recent`)
    ingest.keep_recent(raw.size // 2 - ingest.recent.maxlen)
    ingest.recent.extend((int(s), int(t)) for s, t in raw.reshape(-1, 2))
    counters = {k: int(v) for k, v in state["counters"].items()}
    ingest.messages, ingest.bytes = counters.get("messages", 0), counters.get("bytes", 0)
    ingest.samples_put, ingest.duplicates = (
        counters.get("samples_put", 0),
        counters.get("duplicates", 0),
    )
    ingest.incomplete_dropped = counters.get("incomplete_dropped", 0)
    ingest.ignored_after_end = counters.get("ignored_after_end", 0)
    ingest.connections_lost = counters.get("connections_lost", 0)  # (absent before)
    ingest.nonfinite.refused = counters.get("nonfinite_refused", 0)  # (absent before)
    ingest.rejected.update({r: counters.get(f"rejected_{r}", 0) for r in REJECT_REASONS})
    ingest.abandoned = {int(s) for s in state.get("abandoned", [])}
    ingest.replaced = {int(s) for s in state.get("replaced", [])}
    ingest.schema.load_json(state.get("schema"))
    ingest.schema.load_order(state.get("parameter_order"))  # (absent before)
    for rec in ingest.sims.values():  # a record written before vectors had one order
        rec.order_parameters_as(ingest.schema.arrange(rec.parameters))
    first = state.get(BUFFER_SAVED_FIRST) is True
    _forget_after(ingest, int(state["marked"]), buffer_put, first)


def lag_problem(
    rank: int, marked: int, buffer_put: int, recent: int, buffer_first: bool = True
) -> str | None:
    """Why a receiver record that `marked` samples and kept the keys of the last
    `recent` cannot be resumed exactly against a buffer whose snapshot counts
    `buffer_put` puts; None when it can (``0 <= marked - buffer_put <= recent``), or,
    for a record whose checkpoint did not save the buffer first (`buffer_first` False:
    no `BUFFER_SAVED_FIRST`, an older version's), when the buffer is ahead by no more
    than `recent` puts: what that order left (the puts made while the record was
    written, before the buffer's snapshot), resumed as it was before, warned of
    (`_forget_after`: those samples are taken again if re-sent).

    Within one checkpoint it never happens: the buffer's snapshot is written first
    (`checkpoint.registry.write`), nothing reads the buffer until the record is taken,
    so the puts in between are at most its room (at most its capacity, a reservoir's
    drawn samples included), and the samples recorded but not put at most one message
    (a blocked put, or a pump's overflow); the record keeps ``capacity + 16`` keys
    besides the largest message's (`IngestState.keep_recent`). A gap beyond that means
    the record and the buffer are not of one save: a buffer file from another
    checkpoint, a checkpoint written before the buffer was saved first, or samples put
    into the trainer's buffer by hand. Resuming anyway lost the samples recorded beyond
    the keys kept (their steps dropped as duplicates when re-sent), or, with the buffer
    ahead, trained on its extra samples twice: a resume is exact or refused."""
    behind = marked - buffer_put
    if 0 <= behind <= recent or (not buffer_first and -recent <= behind < 0):
        return None
    if behind < 0:
        how = f"the buffer holds {plural(-behind, 'put')} more than the record took"
    else:
        how = (
            f"{plural(behind, 'sample')} recorded after the buffer's snapshot, beyond "
            f"the {plural(recent, 'key')} the record kept to forget them"
        )
    older = (
        ""
        if buffer_first
        else "written by a version that saved the record before the buffer (before "
        "2026-11-29) beyond what that order leaves, "
    )
    return (
        f"cannot resume exactly: the receiver record of rank {rank} "
        f"({plural(marked, 'sample')} recorded) and the buffer's snapshot of the "
        f"checkpoint ({buffer_put} put) are not of one save: {how}. Resuming would lose "
        f"samples or train on some twice. The checkpoint's rank_{rank}/ files were "
        f"mixed (a buffer of another checkpoint), {older}or the buffer was fed by hand: "
        f"resume from a checkpoint written whole by this version, or start the run afresh"
    )


def held_of(ingest: IngestState) -> dict[int, tuple[int, int, bytes]]:
    """What `ingest` holds of each simulation, as a follow socket answers it
    (`IngestState.held_record`, which says when it is taken)."""
    out: dict[int, tuple[int, int, bytes]] = {}
    for sid in ingest.archive.steps:
        out[sid] = (protocol.HELD_FINISHED, 0, b"")
    for sid, rec in ingest.sims.items():
        if rec.finished:
            out[sid] = (protocol.HELD_FINISHED, 0, b"")
        else:
            nbits = rec.frontier
            out[sid] = (protocol.HELD_STEPS, nbits, bytes(rec.done[: (nbits + 7) // 8]))
    for sid in ingest.abandoned:
        out[sid] = (protocol.HELD_ABANDONED, 0, b"")
    return out


def held_now(ingest: IngestState, simulation_id: int) -> tuple[int, int, bytes]:
    """What `ingest` holds of `simulation_id` now, as `held_of` says it of all: what a
    follow socket answers (`follow_server`), read live from its thread while the ingester
    runs. A step it says held is one the ingest has marked, which it would drop as a
    duplicate if sent again, so a client that skips it loses nothing (a Slurm requeue's
    rerun, `client.rerun`). Single reads (the abandoned set, then the ledger, then the
    archive, which a finished ledger moves to before it leaves `sims`, as `receipt_of`)
    and a copy of the ledger's bytes: a step marked meanwhile may be missing (it is then
    sent again and dropped), never one not marked."""
    if simulation_id in ingest.abandoned:
        return protocol.HELD_ABANDONED, 0, b""
    rec = ingest.sims.get(simulation_id)
    if rec is None:
        archived = ingest.archive.steps.get(simulation_id) is not None
        return (protocol.HELD_FINISHED if archived else protocol.HELD_NONE), 0, b""
    if rec.finished:
        return protocol.HELD_FINISHED, 0, b""
    nbits = rec.frontier  # (read before the bytes: a later mark adds no bit past it)
    return protocol.HELD_STEPS, nbits, bytes(rec.done[: (nbits + 7) // 8])


def _forget_after(ingest: IngestState, marked: int, buffer_put: int, first: bool) -> None:
    """After `load_record`: forget the last ``marked - buffer_put`` samples recorded
    (not in the buffer's snapshot), then find the finished simulations. `first`: the
    record says its checkpoint saved the buffer first (`BUFFER_SAVED_FIRST`).

    Raises:
        ValueError: the record and the buffer's put count disagree beyond the keys the
            record kept (`lag_problem`): the resume could not be exact, so it is refused.
    """
    problem = lag_problem(ingest.rank, marked, buffer_put, len(ingest.recent), first)
    if problem is not None:
        raise ValueError(problem)
    behind = marked - buffer_put
    if behind < 0:  # (a record of the older order: `lag_problem`)
        logger.warning(
            "receiver record of rank %d (%s) and buffer (%d put): the buffer holds %s "
            "more than the record took, left by a checkpoint of a version that saved the "
            "record before the buffer (before 2026-11-29): resumed as then, the samples "
            "put in between are taken again if re-sent (up to %s trained on twice)",
            ingest.rank,
            plural(marked, "sample"),
            buffer_put,
            plural(-behind, "put"),
            plural(-behind, "sample"),
        )
    forgotten = 0
    world = ingest.world
    for _ in range(max(0, behind)):
        sim, t = ingest.recent.pop()
        if sim in ingest.sims:
            rec = ingest.sims[sim]
            # A step forgotten here was not in the buffer's snapshot: its simulation
            # is not finished after all (it must re-send that step), and its put is
            # not counted (it is counted again when the step is put again).
            if rec.unmark(t // world):
                forgotten += 1
                rec.finished = False
    ingest.samples_put = max(0, ingest.samples_put - forgotten)
    ingest.finished_ids = list(ingest.archive.steps)
    for sid, rec in ingest.sims.items():
        if rec.finished:  # archived after `recent_size` more puts, as if finished now
            ingest.finished_ids.append(sid)
            ingest.archive.finished(sid, buffer_put)
    ingest.simulations_finished = len(ingest.finished_ids)
    ingest.marked = buffer_put
    for rec in list(ingest.sims.values()):  # complete already (an upgraded state)
        if not rec.finished and len(rec.byes) >= rec.client_count:
            ingest.check_finished(rec)
