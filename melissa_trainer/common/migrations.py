"""Every migration of a checkpoint's records, keyed by record and version.

A record is the state one part of a checkpoint keeps (`checkpoint.registry` lists
the parts); it changes format now and then, and a checkpoint written before the change must
still resume. Each change is a pure function here, taking a record of version ``v`` to
``v + 1`` (`MIGRATIONS`); `upgrade` chains them up to `CURRENT`. The owners of the
records call `upgrade` in their ``load_state_dict`` (a record of the current version
passes through unchanged), so a record is read in one format only.

The records and their versions:

* ``"receiver"``: a `StreamSource` receiver's dedup record (``"version"`` inside;
  `Ingest.state_dict`). 1 -> 2: a BYE count was over all receivers, it is the steps
  sent to this one (protocol 2); 2 -> 3: finished simulations may be archived (nothing
  to change); 3 -> 4: each simulation's routing is recorded (``"routing"``: the ids of
  those routed ``(simulation_id + t) % W``); an older record's were all ``t % W``.
* ``"launcher"``: a study's `StudyRecord` (``"version"`` inside). 1 -> 2: the states
  "complete" and "exited" exist (version 1 recorded "finished" on exit 0: nothing to
  change); 2 -> 3: one JSON object per simulation becomes one list per attribute.
* ``"breed_sampler"``: a `BreedSampler` state (no version inside: 1 is recognised by
  its shape, see `version_of`). 1 -> 2: gap-filling (its ``candidates``, ``memory``
  and exploration state); depends on the loading sampler's ``candidates`` and
  ``memory`` (`upgrade`'s ``context``).
  Fields added since with a default when absent, no new version (a state without
  them is today's state that lacks them): an adaptive sampler's ``observed_at_draw``
  and ``adaptive_draws`` (unknown: `AdaptiveSampler.load_state_dict`) and an "lhs"
  exploration's ``design`` (computed again from the seed: `launcher.exploration_state`).
* ``"trainer_state"``: `TrainerState` (the version is the checkpoint's, in its
  ``format.json``; a checkpoint without it is format 1). 1 -> 2: ``samples_seen`` is
  the per-rank part's (``trainer_rank``), no longer also kept here.

Pure functions of plain data: this module imports nothing of the package, so every
owner may import it (no cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["CURRENT", "MIGRATIONS", "trainer_rank_of", "upgrade", "version_of"]

State = dict[str, Any]
#: takes a record of one version to the next; ``context`` is what the loading owner knows
Migration = Callable[..., State]


def _receiver_1(state: State) -> State:
    """Version 1 (protocol 1) recorded each client rank's BYE count over all receivers,
    a receiver taking its steps to be those t < count with t % world_size == rank.
    Version 2 counts the steps sent to this receiver, so a version-1 count becomes the
    number of such t (the same with one receiver): the simulation finishes as it would
    have under version 1."""
    rank, world = int(state["rank"]), int(state["world_size"])
    sims = {
        sid: dict(rec, byes={r: len(range(rank, int(n), world)) for r, n in rec["byes"].items()})
        for sid, rec in state["simulations"].items()
    }
    return dict(state, version=2, simulations=sims)


def _receiver_2(state: State) -> State:
    """The same, with nothing archived."""
    return dict(state, version=3)


def _receiver_3(state: State) -> State:
    """Every simulation of a record before routing was recorded was routed ``t % W``
    (the HELLO had no ``"routing"`` key then): none is listed as routed
    ``(simulation_id + t) % W`` (``"simulation_step"``)."""
    return dict(state, version=4, routing={"simulation_step": []})


def _launcher_1(state: State) -> State:
    """Nothing to change: version 1's "finished" on exit 0 reads as finished."""
    return dict(state, version=2)


def _launcher_2(state: State) -> State:
    """One JSON object per simulation (`SimulationRecord.to_json`) becomes one list per
    attribute, in id order (`simulation_record.columns`). Every record must have the
    same parameter names (the sampler's: it checks them against its own on load)."""
    sims = {int(k): v for k, v in state["simulations"].items()}
    ids = sorted(sims)
    rows = [sims[sid] for sid in ids]
    names = list(rows[0]["parameters"]) if rows else []
    for sid, row in zip(ids, rows, strict=True):
        if set(row["parameters"]) != set(names):
            raise ValueError(
                f"simulation {sid} in the launcher state has parameters "
                f"{row['parameters']}, not finite values of {sorted(names)}"
            )
    columns = {
        "ids": ids,
        "status": [row["status"] for row in rows],
        "parameters": {name: [row["parameters"][name] for row in rows] for name in names},
        "restarts": [row["restarts"] for row in rows],
        # (absent before attempts were counted: one per exit)
        "attempts": [row.get("attempts", len(row["exit_codes"])) for row in rows],
        "exit_codes": [list(row["exit_codes"]) for row in rows],
        "seconds": [row["seconds"] for row in rows],
        "reasons": {str(sid): str(row["reason"]) for sid, row in sims.items() if row.get("reason")},
    }
    return dict(state, version=3, simulations=columns)


def _breed_1(state: State, *, candidates: int, memory: int) -> State:
    """A `BreedSampler` state saved before gap-filling, in today's format, to be loaded
    by a sampler of `candidates` and `memory`.

    Such a state has no "candidates" (nor "memory"), and its "exploration_state" is
    that of the plain `SobolSampler` / `HaltonSampler` Breed explored with:
    ``{"kind", "names", "seed", "position", "scramble"}``. It explored with
    ``candidates=1`` (the sequence's next point, nothing remembered), so it becomes
    ``candidates=1`` with no remembered draw, and the sequence's position as both the
    draws explored and the points consumed: a ``BreedSampler(candidates=1)`` that loads
    it makes the draws the old code would have. `memory` is taken as the sampler's own:
    with one candidate nothing is remembered, so it changes no draw.

    Raises:
        ValueError: `candidates` is not 1 (the message says to build the sampler with
            ``candidates=1``), or the old exploration state is not of this sampler
            (names, seed, unscrambled).
    """
    old = state["exploration_state"]
    if candidates != 1:
        raise ValueError(
            f"this Breed sampler state predates gap-filling (it has no candidates: its "
            f"exploration took the sequence's next point); this sampler has "
            f"candidates={candidates}: build the sampler with candidates=1 to resume it"
        )
    for key, value in (("names", state.get("names")), ("seed", state.get("seed"))):
        if old.get(key) != value:
            raise ValueError(
                f"exploration state has {key}={old.get(key)!r}, its sampler {key}={value!r}"
            )
    if old.get("scramble", True) is not True:
        raise ValueError("exploration state is unscrambled: Breed's sequence is scrambled")
    position = old.get("position")
    exploration: dict[str, Any] = {
        "engine": old.get("kind"),
        "explored": position,
        "position": position,
        "drawn": [],
    }
    return {**state, "candidates": 1, "memory": memory, "exploration_state": exploration}


def _trainer_state_1(state: State) -> State:
    """``samples_seen`` left out: each rank's is in its ``trainer_rank`` part (format 1
    kept rank 0's here too; a checkpoint of a version before ``trainer_rank.json``
    existed gives it to that part instead: `checkpoint.registry`)."""
    return {k: v for k, v in state.items() if k != "samples_seen"}


def trainer_rank_of(trainer_state: Mapping[str, Any]) -> State:
    """The ``trainer_rank`` record (this rank's ``samples_seen`` and loss since the last
    log) of a checkpoint written before ``trainer_rank.json`` existed, from its trainer
    state (format 1): rank 0's ``samples_seen``, which every rank resumed with then
    (0 when absent: a field's default), and no loss since the last log (the log
    figures start afresh)."""
    return {
        "samples_seen": int(trainer_state.get("samples_seen", 0)),
        "loss_sum": 0.0,
        "loss_count": 0,
    }


#: the current version of each record
CURRENT: dict[str, int] = {"receiver": 4, "launcher": 3, "breed_sampler": 2, "trainer_state": 2}
#: (record, version) -> the migration of that version to the next
MIGRATIONS: dict[tuple[str, int], Migration] = {
    ("receiver", 1): _receiver_1,
    ("receiver", 2): _receiver_2,
    ("receiver", 3): _receiver_3,
    ("launcher", 1): _launcher_1,
    ("launcher", 2): _launcher_2,
    ("breed_sampler", 1): _breed_1,
    ("trainer_state", 1): _trainer_state_1,
}


def version_of(record: str, state: Mapping[str, Any]) -> int:
    """The version of a record that carries its own: ``"version"`` inside (receiver,
    launcher), or its shape (breed_sampler: 1 before gap-filling, without
    ``"candidates"``). Raises ValueError for a record that carries none."""
    if record == "breed_sampler":
        old = state.get("exploration_state")
        old_shape = "candidates" not in state and isinstance(old, Mapping)
        return 1 if state.get("kind") == "breed" and old_shape else 2
    if record in ("receiver", "launcher"):
        version = state.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"unknown {record} state version {version!r}")
        return version
    raise ValueError(f"the {record} record carries no version: pass it")


def upgrade(
    record: str, state: Mapping[str, Any], version: int | None = None, **context: Any
) -> State:
    """`state`, a `record` of `version` (None: `version_of`), as the current version (a
    new dict when a migration ran; `state` itself is never modified). `context`: what
    a migration needs from the loading owner (breed_sampler: ``candidates``,
    ``memory``).

    Raises:
        ValueError: an unknown record or version (a newer one included), or a state
            a migration refuses (it says why).
    """
    if record not in CURRENT:
        raise ValueError(f"no such checkpoint record {record!r}")
    if version is None:
        version = version_of(record, state)
    current = CURRENT[record]
    if not 1 <= version <= current:
        raise ValueError(f"unknown {record} state version {version!r}")
    out = dict(state)
    while version < current:
        migration = MIGRATIONS[(record, version)]
        out = migration(out, **context) if record == "breed_sampler" else migration(out)
        version += 1
    return out
