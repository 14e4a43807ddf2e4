"""Which receiver gets a time step (docs/protocol.md, "Routing" and section 3).

A client sends the DATA of simulation s's time step t to receiver
``receiver_of(s, t, W, routing)`` of the W training ranks, where `routing` is what its
HELLO said:

* `SIMULATION_STEP` (``"routing": "simulation_step"``): ``(s + t) % W``. A simulation
  of one time step (a steady-state solver) goes to rank ``s % W``, so the simulations
  of a study spread over the ranks; consecutive steps of one simulation still go round
  the ranks in turn. Receivers advertise it in their rendezvous files; a client uses it
  when every file it read says so, and says so in its HELLO, unless a file lists its
  simulation under `KEPT` (below).
* None (a HELLO without the key: older clients, any client given its endpoints
  rather than a rendezvous, and a simulation a rendezvous file lists under `KEPT`):
  ``t % W``, the routing of protocol 2 before the key existed.

A simulation keeps its first routing for its whole life, over every restart of its client
and of the trainer: the receivers hold its steps by it. A receiver resumed from a record
that holds simulations routed ``t % W`` (a checkpoint of a trainer from before the routing
existed, or of a simulation of an older client) lists those of its ledgers in its
rendezvous file (``"routed_t_mod_w": [ids]``, `KEPT`): the client of a listed simulation,
restarted by its launcher with the current library, routes ``t % W`` (and sends no key),
as its first client did (docs/protocol.md section 3, "Upgrading in the middle of a study").

A receiver of rank r keeps the step t it gets as its *local* step ``t // W`` in either
routing (the map is one to one on the steps it gets), so a checkpoint's bit arrays, a
HELD reply's bits and a BYE's count mean the same in both; turning a local step back
into a time step needs the routing: ``i * W + first_step(s, r, W, routing)``.

Standard library only; pure functions.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

__all__ = [
    "KEPT",
    "ROUTINGS",
    "SIMULATION_STEP",
    "first_step",
    "kept_of",
    "receiver_of",
    "routing_of_entries",
    "shift_of",
]

#: the HELLO and rendezvous value of the routing ``(simulation_id + t) % W``
SIMULATION_STEP = "simulation_step"
#: the routings a HELLO may name (absent: ``t % W``)
ROUTINGS = (SIMULATION_STEP,)
#: the rendezvous key listing the simulations that keep the routing ``t % W``
KEPT = "routed_t_mod_w"


def shift_of(simulation_id: int, world: int, routing: str | None) -> int:
    """What `routing` adds to a time step before taking it modulo `world`: in
    ``0 .. world - 1`` (so that ``(t + shift) % W`` never overflows a 64-bit sum)."""
    return simulation_id % world if routing == SIMULATION_STEP else 0


def receiver_of(simulation_id: int, step: int, world: int, routing: str | None) -> int:
    """The rank of the `world` receivers that gets `simulation_id`'s time step `step`."""
    return (step + shift_of(simulation_id, world, routing)) % world


def first_step(simulation_id: int, rank: int, world: int, routing: str | None) -> int:
    """The smallest time step receiver `rank` gets: its local step i is the time step
    ``i * world + first_step(...)``."""
    return (rank - shift_of(simulation_id, world, routing)) % world


def routing_of_entries(
    entries: Iterable[Mapping[str, Any]], simulation_id: int | None = None
) -> str | None:
    """The routing a client of `simulation_id` uses with the receivers of these
    rendezvous `entries`: `SIMULATION_STEP` when every one advertises it
    (``"routing"``) and none lists `simulation_id` under `KEPT` (a simulation its
    receivers hold steps of routed ``t % W``), else None (``t % W``: an older trainer's
    files, which its receivers expect, or a simulation that began routed so). A `KEPT`
    value that is not a list of integers is read as listing nothing."""
    entries = list(entries)
    said = [e.get("routing") for e in entries]
    if not (said and all(r == SIMULATION_STEP for r in said)):
        return None
    if simulation_id is not None and any(_lists(e.get(KEPT), simulation_id) for e in entries):
        return None
    return SIMULATION_STEP


def _lists(kept: Any, simulation_id: int) -> bool:
    """Whether `kept` (a rendezvous file's `KEPT` value) is a list naming `simulation_id`."""
    return isinstance(kept, list) and any(type(s) is int and s == simulation_id for s in kept)


def kept_of(ids: Iterable[int], shifted: Container[int]) -> dict[str, list[int]]:
    """The rendezvous member of a receiver whose ledgers are of simulations `ids`, of
    which those in `shifted` are routed `SIMULATION_STEP`: ``{KEPT: [the others]}``, or
    ``{}`` when there are none (every simulation of a record of this version)."""
    kept = sorted(s for s in ids if s not in shifted)
    return {KEPT: kept} if kept else {}
