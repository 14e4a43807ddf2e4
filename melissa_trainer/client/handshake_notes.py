"""What a wait that gave up adds, from what the handshake monitors (`handshake.Handshakes`)
know of the receivers: none ever accepted a connection, or a peer is not a receiver
(`never_note`); a peer connected at the TCP level without a ZeroMQ handshake yet
(`pending_note`); a receiver once connected is disconnected now (`down_note`). The
words of a close that gave up (`patience`) and of a send (`send_wait.SendWait.timeout`),
as the C client words them (clients/c/src/handshake.c). Each reads the monitors without
blocking.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from melissa_trainer.client.handshake_words import NOT_RECEIVER

if TYPE_CHECKING:  # pragma: no cover (`handshake` imports this module)
    from melissa_trainer.client.handshake import Handshakes

__all__ = ["CUT_BEFORE_HANDSHAKE", "down_note", "gone_cause", "never_note", "pending_note"]


def never_note(handshakes: Handshakes | None, endpoints: Sequence[str]) -> str:
    """What a wait that gave up adds when no connection to a receiver was ever accepted
    (`Handshakes.never_connected`: a wrong endpoint, a trainer not started), as the C
    client words it (clients/c/src/handshake.c): "no receiver ever accepted a connection
    at E1, E2: check the endpoint (the trainer's rank_N.json) or start the trainer
    first"; and when a peer is not a receiver (`Handshakes.not_receivers`): "E:
    `NOT_RECEIVER`"; "" when neither (or no monitor: `handshakes` None). The words of a
    close that gave up (`patience`) and of a send (`send_wait.SendWait.timeout`)."""
    never = [] if handshakes is None else handshakes.never_connected(endpoints)
    other = [] if handshakes is None else handshakes.not_receivers(endpoints)
    notes = [f"{', '.join(other)}: {NOT_RECEIVER}"] if other else []
    if never:
        notes.append(
            f"no receiver ever accepted a connection at {', '.join(never)}: check the "
            "endpoint (the trainer's rank_N.json) or start the trainer first"
        )
    return "; ".join(notes)


#: why a peer went that accepted TCP and ended the connection before any ZeroMQ handshake
#: completed (`gone_cause`): no receiver ever spoke there, so "the trainer died" is a guess.
#: The C client's words too (clients/c/src/close_failed.c)
CUT_BEFORE_HANDSHAKE = (
    "the peer closed the connection before any ZeroMQ handshake completed: a trainer that "
    "died as it started, or a program that is not a receiver (check the endpoint: the "
    "trainer's rank_N.json)"
)


def gone_cause(handshakes: Handshakes, index: int, cause: str | None) -> str:
    """Why socket `index`'s receiver went, as `peer_watch.PeerWatch.gone` says it: `cause`
    (a stop record's), else `CUT_BEFORE_HANDSHAKE` when no handshake ever completed on
    it, else "the trainer died, or its node" (one that completed a handshake did run)."""
    if cause:
        return cause
    return "the trainer died, or its node" if handshakes.spoke(index) else CUT_BEFORE_HANDSHAKE


#: why a receiver went, when no stop record says (`down_note`)
_DOWN_CAUSE = "the trainer died or was restarted, or its node"


def down_note(handshakes: Handshakes, endpoints: Sequence[str], cause: str | None = None) -> str:
    """What a wait that gave up adds when a receiver once connected is disconnected now
    (`Handshakes.down_since`; not one `never_note` speaks of): "the trainer's receiver at
    E is disconnected for N s without a new connection (the trainer died or was
    restarted, or its node)", `cause` in the parentheses when a stop record says why
    ("the trainer was preempted (...)"), one clause per receiver joined by "; "; ""
    when none is."""
    other = set(handshakes.not_receivers(endpoints))  # (reads the events)
    ever = set(endpoints) - set(handshakes.never_connected(endpoints)) - other
    now, notes = time.monotonic(), []
    for endpoint, since in zip(endpoints, handshakes.down_since, strict=False):
        if since is not None and endpoint in ever:
            notes.append(
                f"the trainer's receiver at {endpoint} is disconnected for {now - since:.0f} s "
                f"without a new connection ({cause or _DOWN_CAUSE})"
            )
    return "; ".join(notes)


def pending_note(handshakes: Handshakes, endpoints: Sequence[str]) -> str:
    """What a wait that gave up adds when a peer accepted TCP but no ZeroMQ handshake
    completed yet, sooner than `handshake_timing.NOT_ZMQ_AFTER` decides that it is not a receiver
    (`Handshakes.pending`: a `send_timeout` or `close_timeout` shorter than that): "E
    is connected at the TCP level, but no ZeroMQ handshake completed yet (N s after
    this client connected; a receiver's completes in milliseconds): if this persists,
    it is not a trainer's receiver: check the endpoint (the trainer's rank_N.json)", one
    clause per peer joined by "; "; "" when none is. Not back-pressure, which only a
    receiver that completed its handshake can exert."""
    return "; ".join(
        f"{endpoint} is connected at the TCP level, but no ZeroMQ handshake completed yet "
        f"({waited:.1f} s after this client connected; a receiver's completes in "
        "milliseconds): "
        "if this persists, it is not a trainer's receiver: check the endpoint (the "
        "trainer's rank_N.json)"
        for endpoint, waited in handshakes.pending(endpoints)
    )
