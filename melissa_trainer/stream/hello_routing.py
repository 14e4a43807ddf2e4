"""Why a HELLO is refused for naming another routing than its simulation's first HELLO
at this receiver (`routing_differs`), worded for the ingest's ``hello_mismatch``.

Refused rather than followed: the steps a receiver recorded were routed the first way,
and the other receivers hold the rest by that routing (`wire.routing`: a simulation
keeps its first routing for its whole life). Pure: no state of the ingest's.
"""

from __future__ import annotations

from melissa_trainer.wire import Hello
from melissa_trainer.wire.routing import SIMULATION_STEP, shift_of

__all__ = ["routing_differs"]


def routing_differs(hello: Hello, world: int, first: str | None) -> str | None:
    """Why `hello` is refused, given `first`, the routing its simulation's first HELLO
    here named (recorded with its ledger, or in a checkpoint), among `world` receivers;
    None when both route its steps to the same receivers (the same routing, or
    s % W == 0, or W == 1). Only for a simulation already known here: a first HELLO
    sets the routing."""
    sid = hello.simulation_id
    if shift_of(sid, world, hello.routing) == shift_of(sid, world, first):
        return None  # (the same receivers either way: s % W == 0, or W == 1)
    said = {None: "t % W (no routing key)", SIMULATION_STEP: f"{SIMULATION_STEP!r}"}
    return (
        f"HELLO says routing {said[hello.routing]}, its first HELLO here said "
        f"{said[first]}: every HELLO of a simulation must route its steps alike (a "
        f"client of another version, or given endpoints instead of the rendezvous, "
        f"rejoined it); its steps are judged by the first routing (those it sends "
        f"elsewhere are rejected here as wrong_receiver): run it with the current "
        f"client library reading the rendezvous, which routes it as it began "
        f"(docs/protocol.md section 3)"
    )
