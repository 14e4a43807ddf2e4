"""What a closing client says when the receipt phase (`receipts.Rounds.wait`) ends
without every receiver's RECEIPT: a receiver refused the simulation (`refused`, which
raises `SimulationRefused`), one is gone (`gone_words`), or none made progress within
``close_timeout`` (`unconfirmed`); and `Closed`, what that phase reads of the client.

Contract: each says why, and what to do (run the simulation again with the same id,
`gave_up.rerun_words`; raise the setting that bounded the wait; the C client's
receipt.c says `unconfirmed`'s in the same words); none waits, sends or changes
anything (`gone_words` reads the receiver's ``rank_{rank}.json`` to tell a trainer that
stopped from one that died). `receipts` re-exports `Closed`, its import path before.
Imports the standard library, numpy (through `wire`) and this package's client modules
only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from melissa_trainer import wire as protocol
from melissa_trainer.client.admission import SimulationRefused, reason_with_fix
from melissa_trainer.client.delivery import CLOSE_CAP_FACTOR, capped_words
from melissa_trainer.client.gave_up import rerun_words
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.rank_bounds import read_file
from melissa_trainer.wire.receipt import ReceiptReply

__all__ = ["Closed", "gone_words", "refused", "unconfirmed"]


class Closed(Protocol):
    """What `confirm_close` reads of a closed `Client`."""

    @property
    def simulation_id(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def ranks(self) -> int: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def endpoints(self) -> Sequence[str]: ...
    @property
    def tuning(self) -> ClientTuning: ...
    @property
    def admission_rejected(self) -> Counter[str]: ...

    @property
    def bye_counts(self) -> list[int]: ...  # (each receiver's BYE's count, in rank order)
    @property
    def bye_spans(self) -> list[tuple[int, int] | None]: ...  # (the least and greatest)


def unconfirmed(
    client: Closed,
    whose: str,
    done: Sequence[ReceiptReply | None],
    held: Sequence[int],
    capped: bool = False,
) -> str:
    """Why the close gives up: the receivers not `done` made no progress for
    ``close_timeout`` seconds; how many of the steps this rank sent them are not
    confirmed (`held`: the most steps each said it holds, -1 if it never answered),
    that exiting loses those still queued here, and the fixes; `capped`: too slow
    for the cap (`delivery.capped_words`). receipt.c says it in the same words."""
    waiting = [r for r in range(len(done)) if done[r] is None]
    sent = sum(client.bye_counts[r] for r in waiting)
    have = sum(min(max(held[r], 0), client.bye_counts[r]) for r in waiting)
    if capped:
        timeout, sid = client.tuning.close_timeout, client.simulation_id
        return (
            f"{whose}: the trainer did not confirm this simulation's BYE within "
            f"{CLOSE_CAP_FACTOR} x close_timeout={timeout} s in all: its receivers "
            f"{waiting} ingested {have} of the {sent} steps this rank sent them: "
        ) + capped_words("close_timeout", timeout, "ClientTuning.close_timeout", sid)
    return (
        f"{whose}: the trainer did not confirm this simulation's BYE: its receivers "
        f"{waiting} ingested none of its steps for "
        f"ClientTuning.close_timeout={client.tuning.close_timeout} s (no progress; "
        f"{sent - have} of the {sent} steps this rank sent them not confirmed). Exiting "
        f"now loses those still queued here. A trainer alive but slower than that "
        f"(loaded, a high sample-to-insert ratio): raise the close timeout "
        f"(ClientTuning.close_timeout; it bounds a wait without progress); a trainer "
        f"paused or stuck: once it runs again, {rerun_words(client.simulation_id)} "
        f"if the trainer does not name it finished"
    )


def refused(client: Closed, entries: list[dict[str, Any]], reply: ReceiptReply, rank: int) -> None:
    """Raise `SimulationRefused` when `reply`, receiver `rank`'s (of `entries`), says
    the simulation was refused: the receiver's reason and its fix; nothing otherwise."""
    if reply.admission != protocol.ADMISSION_REFUSED:
        return
    reason = reason_with_fix(reply.reason)
    if "(wrong_run)" in reply.reason:
        reason += (
            ". Start it again (it reads the rendezvous afresh), with the same simulation "
            "id; unset MELISSA_TRAINER_RUN_ID if its environment sets one"
        )
    raise SimulationRefused(
        f"simulation {client.simulation_id}: the trainer's receiver {rank} "
        f"({entries[rank]['endpoint']}) refused it, and dropped everything it "
        f"sent: {reason}"
    )


def gone_words(
    client: Closed,
    entries: list[dict[str, Any]],
    whose: str,
    rank: int,
    gone_after: float | None,
    rendezvous: str,
    follow_wait: float | None,
    never: bool = False,
) -> str:
    """Why the close fails when receiver `rank` is gone, and what to do; `never`: no
    connection to its follow socket was ever accepted (said as the transport's close
    says it of a data socket, `patience.never_note`: a follow endpoint that is wrong
    or unreachable from here, or a trainer gone before the first one)."""
    try:  # (a trainer that stopped cleanly marked its files: `Receiver.stop`)
        stopped = read_file(Path(rendezvous) / f"rank_{rank}.json").get("stopped") is True
    except (OSError, ValueError):
        stopped = False
    why = (
        "its rendezvous is marked stopped: the trainer stopped (preempted, or its run "
        "ended) before it read this BYE"
        if stopped
        else "the trainer died, or its node"
    )
    if never:
        why += (
            f"; no receiver ever accepted a connection at "
            f"{entries[rank].get('follow_endpoint')}: check the endpoint (the "
            f"trainer's rank_{rank}.json) or start the trainer first"
        )
    waited = (
        ""
        if follow_wait is None
        else f", nor within ClientTuning.follow_timeout={follow_wait} s after"
    )
    return (
        f"{whose}: its BYE was not confirmed: the trainer's receiver {rank} "
        f"({entries[rank]['endpoint']}) has not answered, nor been connected, for "
        f"{gone_after} s (ClientTuning.disconnected_timeout): {why}. No restarted "
        f"trainer published in {rendezvous}{waited}. What this simulation sent after the "
        f"trainer's last checkpoint may be lost: once a trainer runs there again (a "
        f"preempted one: --resume_from_checkpoint latest), "
        f"{rerun_words(client.simulation_id)}: the trainer takes "
        f"the steps it lacks, each once"
    )
