"""Which receiver gets a time step (docs/protocol.md, "Routing" and section 3).

A client sends the DATA of simulation s's time step t to receiver
``receiver_of(s, t, W, routing)`` of the W training ranks, where `routing` is what its
HELLO said:

* `SIMULATION_STEP` (``"routing": "simulation_step"``): ``(s + t) % W``. A simulation
  of one time step (a steady-state solver) goes to rank ``s % W``, so the simulations
  of a study spread over the ranks; consecutive steps of one simulation still go round
  the ranks in turn. Receivers advertise it in their rendezvous files; a client uses it
  when every file it read says so, and says so in its HELLO.
* None (a HELLO without the key: older clients, and any client given its endpoints
  rather than a rendezvous): ``t % W``, the routing of protocol 2 before the key existed.

A receiver of rank r keeps the step t it gets as its *local* step ``t // W`` in either
routing (the map is one to one on the steps it gets), so a checkpoint's bit arrays, a
HELD reply's bits and a BYE's count mean the same in both; turning a local step back
into a time step needs the routing: ``i * W + first_step(s, r, W, routing)``.

Standard library only; pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "ROUTINGS",
    "SIMULATION_STEP",
    "first_step",
    "receiver_of",
    "routing_of_entries",
    "shift_of",
]

#: the HELLO and rendezvous value of the routing ``(simulation_id + t) % W``
SIMULATION_STEP = "simulation_step"
#: the routings a HELLO may name (absent: ``t % W``)
ROUTINGS = (SIMULATION_STEP,)


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


def routing_of_entries(entries: Iterable[Mapping[str, Any]]) -> str | None:
    """The routing a client uses with the receivers of these rendezvous `entries`:
    `SIMULATION_STEP` when every one advertises it (``"routing"``), else None
    (``t % W``: an older trainer's files, which its receivers expect)."""
    said = [e.get("routing") for e in entries]
    return SIMULATION_STEP if said and all(r == SIMULATION_STEP for r in said) else None
