"""Resharding the receivers' records: k old ranks' dedup records re-split over m ranks.

A receiver of rank r of W gets the time steps t of simulation s with
``receiver_of(s, t, W, routing) == r`` (``t % W``, or ``(s + t) % W`` for a simulation
whose HELLO said so: `wire.routing`) and records them by local step ``t // W``
(`Ingest`); its local step i is the time step ``i * W + first_step(s, r, W, routing)``.
`reshard_states(states, buffer_puts, rank, world_size, buffer_put)` is a pure function:
each new rank calls it on every old rank's record (its ``source.json``) and gets the
record it loads with `Ingest.load_state_dict` (through `StreamSource.load_state_dict`),
so that a simulation that runs again after the resume has each step put into a buffer
exactly once across the resize.

How:

1. Each old record is upgraded to the current version and loaded into a scratch
   `Ingest` of its own rank and world size with its buffer's put count: its own
   correction runs (the samples recorded after the buffer's snapshot are forgotten),
   so what is merged is exactly what the old buffers hold (which
   `melissa_trainer.buffers.reshard.share` deals over the new ranks).
2. Per simulation, the steps done (bits of its ledgers, steps ``0 .. n-1`` of its
   archive entries) and the steps lost (a partial sample dropped: they count as done
   for finishing) are united as global time steps, then split over the m new ranks by
   the simulation's routing (kept: it is the client's, not the trainer's): new rank j
   holds ``t // m`` for ``receiver_of(s, t, m, routing) == j``. Each simulation's
   routing is the union of the old records' (one simulation has one routing).
3. A simulation finished on *every* old rank (a finished ledger or an archive entry) is
   finished on every new rank: an archive entry where its steps there are ``0 .. n-1``
   (the usual case, computed without a ledger), else a finished ledger whose BYE counts
   are re-derived (each client rank's count: the steps routed there, done or lost; a
   BYE carries the count of steps sent to that receiver, and all were). If no old rank
   kept its declaration (archived everywhere, irregular step numbers), its entry is
   ``n = 1 + the largest local step``: every step up to it is a duplicate, as every
   step of a finished simulation is.
4. Any other simulation (running, forgotten steps, given up) gets an unfinished ledger
   on every new rank with its steps done and lost, and *no* BYE: BYE counts are per
   receiver and cannot be re-derived for steps not all received. A study's launcher
   runs it again (it is complete on no new rank), and its re-sent steps are
   duplicates where done, accepted where not; its new BYEs finish it. In external mode
   (no launcher) it waits for its simulation to be run again, as a resume on the same
   number of ranks waits for the steps its ledgers lack.
5. Given up (``abandoned``, ``replaced``) and the study's schema are global: united (a
   simulation finished everywhere is not given up). Counters are totals, kept on new
   rank 0 (zeros elsewhere), so the trainer's sums over ranks stay exact.
6. The record's own correction is made right for `buffer_put` (the new rank's buffer
   put count once its share is loaded): ``marked = buffer_put`` and no recent key, so
   loading it forgets nothing.

Refused (ValueError): a record of another world size or rank than its index says, and a
running simulation with steps recorded on some old rank but whose declaration (HELLO)
no old rank kept (archived on a rank that finished it, no HELLO elsewhere yet): its new
ledgers cannot be built; resume on the old number of ranks, checkpoint, then resize.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np

from melissa_trainer.common.migrations import upgrade
from melissa_trainer.stream.archive import Archive
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.ingest_record import BUFFER_SAVED_FIRST, STATE_VERSION
from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.wire.routing import SIMULATION_STEP, first_step, shift_of

__all__ = ["reshard_states"]

_NEVER = 1 << 62  # limits of the scratch ingests, which receive no message


def reshard_states(
    states: Sequence[dict[str, Any]],
    buffer_puts: Sequence[int],
    rank: int,
    world_size: int,
    buffer_put: int,
) -> dict[str, Any]:
    """The receiver record new rank `rank` of `world_size` loads (module docstring).

    Args:
        states: old rank r's receiver record (`StreamSource.state_dict`) at index r;
            an empty one is a receiver that recorded nothing.
        buffer_puts: old rank r's buffer put count (its snapshot's ``put``).
        buffer_put: the new rank's buffer put count after loading its share.

    Raises:
        ValueError: see the module docstring; an unknown record version.
    """
    k = len(states)
    if k == 0 or len(buffer_puts) != k:
        raise ValueError(f"{k} receiver records and {len(buffer_puts)} buffer put counts")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} of world size {world_size} is out of range")
    if not any(states):
        return {}
    pairs = enumerate(zip(states, buffer_puts, strict=True))
    olds = [_corrected(s, r, k, int(p)) for r, (s, p) in pairs]
    shifted = set().union(*(o.shifted for o in olds))
    sims, archive = _split(olds, k, rank, world_size, shifted)
    finished = set(archive.steps) | {s for s, rec in sims.items() if rec.finished}
    abandoned = set().union(*(o.abandoned for o in olds)) - finished
    replaced = set().union(*(o.replaced for o in olds)) - finished
    schema = next((o.schema.to_json() for o in olds if o.schema.to_json() is not None), None)
    order = next((o.schema.order for o in olds if o.schema.order), None)  # (learned: rank 0's)
    counters: dict[str, int] = {}
    for o in olds:
        for key, value in o.telemetry().items():
            counters[key] = counters.get(key, 0) + (int(value) if rank == 0 else 0)
    return {
        "version": STATE_VERSION,
        "rank": rank,
        "world_size": world_size,
        "simulations": {str(s): sims[s].to_state() for s in sorted(sims)},
        "archive": archive.to_state(),
        "routing": {SIMULATION_STEP: sorted(shifted)},
        "abandoned": sorted(abandoned),
        "replaced": sorted(replaced),
        "schema": schema,
        "parameter_order": order,
        "marked": int(buffer_put),
        "recent": "",
        "counters": counters,
        BUFFER_SAVED_FIRST: True,  # (`marked` is the new buffer's count: never behind)
    }


def _corrected(state: dict[str, Any], r: int, k: int, buffer_put: int) -> Ingest:
    """Old rank `r`'s record in a scratch ingest, its own correction applied."""
    raw = state.get("recent", "") if state else ""
    recent = len(base64.b64decode(raw, validate=True)) // 16
    ingest = Ingest(
        r,
        k,
        put=lambda sample: True,
        end=lambda why: None,
        expected=None,
        max_field_bytes=_NEVER,
        max_pending=1,
        max_pending_bytes=_NEVER,
        max_time_step=_NEVER,
        recent_size=max(1, recent),
    )
    if not state:
        return ingest
    state = upgrade("receiver", state)
    if (state["rank"], state["world_size"]) != (r, k):
        raise ValueError(
            f"the receiver record of old rank {r} of {k} says rank {state['rank']} of "
            f"{state['world_size']}: records of one checkpoint, in rank order, are needed"
        )
    ingest.load_state_dict(state, buffer_put)
    return ingest


def _steps(rec: StepLedger) -> np.ndarray:
    """The local steps a ledger has done."""
    bits = np.unpackbits(np.frombuffer(bytes(rec.done), np.uint8), bitorder="little")
    return np.flatnonzero(bits)


def _count(n: np.ndarray, r: int | np.ndarray, k: int) -> np.ndarray:
    """How many of the steps ``0 .. n-1`` go to rank `r` of `k`."""
    return np.maximum(0, (n - r + k - 1) // k)


def _split(
    olds: list[Ingest], k: int, rank: int, m: int, shifted: set[int]
) -> tuple[dict[int, StepLedger], Archive]:
    """New rank `rank`'s ledgers and archive; `shifted`: the simulations routed
    ``(s + t) % W`` (`wire.routing`)."""

    def route(s: int) -> str | None:
        return SIMULATION_STEP if s in shifted else None

    archive = Archive(1)
    sims: dict[int, StepLedger] = {}
    ids = sorted(set().union(*(o.sims.keys() | o.archive.steps.keys() for o in olds)))
    # The usual finished simulation, archived on every old rank with steps 0 .. N-1 in
    # all: archived here too, vectorized (a study may have 10^5 of them).
    everywhere = [s for s in ids if all(s in o.archive.steps for o in olds)]
    if everywhere:
        n = np.array([[o.archive.steps[s] for o in olds] for s in everywhere], np.int64)
        total = n.sum(axis=1)
        # each old rank's first step, and the new rank's, by each simulation's routing
        firsts = np.array([[first_step(s, r, k, route(s)) for r in range(k)] for s in everywhere])
        mine_first = np.array([first_step(s, rank, m, route(s)) for s in everywhere], np.int64)
        regular = (n == _count(total[:, None], firsts, k)).all(axis=1)
        mine = _count(total, mine_first, m)
        for s, ok, count in zip(everywhere, regular.tolist(), mine.tolist(), strict=True):
            if ok:
                archive.steps[s] = count
    for s in ids:
        if s in archive.steps:
            continue
        done: list[np.ndarray] = []
        lost: list[int] = []
        finished = True
        declared: StepLedger | None = None
        for r, o in enumerate(olds):
            rec = o.sims.get(s)
            first = first_step(s, r, k, route(s))  # old rank r's local step i: i * k + first
            if rec is not None:
                declared = declared or rec
                done.append(_steps(rec) * k + first)
                lost += [i * k + first for i in rec.lost]
                finished &= rec.finished
            elif s in o.archive.steps:
                done.append(np.arange(o.archive.steps[s], dtype=np.int64) * k + first)
            else:
                finished = False
        steps = np.unique(np.concatenate(done)) if done else np.zeros(0, np.int64)
        shift = shift_of(s, m, route(s))
        here = steps[(steps % m + shift) % m == rank] // m
        gone = sorted(t // m for t in set(lost) if (t + shift) % m == rank)
        if finished and not gone and np.array_equal(here, np.arange(here.size)):
            archive.steps[s] = int(here.size)
        elif declared is not None:
            rec = StepLedger(s, declared.client_count, declared.fields, dict(declared.parameters))
            rec.mark_many(here)
            rec.lost = set(gone)
            if finished:
                rec.finished = True
                rec.byes = dict.fromkeys(range(rec.client_count), int(here.size) + len(gone))
            sims[s] = rec
        elif finished:  # archived everywhere, irregular steps: every step a duplicate
            archive.steps[s] = int(max(here.max(initial=-1), max(gone, default=-1))) + 1
        elif steps.size or lost:
            raise ValueError(
                f"simulation {s} is running with steps recorded on some old rank, but no "
                "old rank kept its declaration (HELLO) to rebuild its record on the new "
                "ranks: resume on the old number of ranks, checkpoint, then resize"
            )
    return sims, archive
